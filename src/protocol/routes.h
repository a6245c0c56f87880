// The HTTP paths sluice serves on its data plane (DESIGN.md §3.1).
#pragma once

#include <string_view>

namespace sluice::protocol {

enum class Route {
  kCompletions,
  kChatCompletions,
  kEmbeddings,
  kResponses,
  kModels,
  // A request passthrough-parser takes (requestHandler.parsers): admitted
  // and scheduled, its body forwarded unread. The exchange decides it, not
  // classify_target.
  kPassthrough,
  kUnknown,
};

// Classifies a request target (the query string is ignored).
inline Route classify_target(std::string_view target) {
  auto q = target.find('?');
  if (q != std::string_view::npos) target = target.substr(0, q);
  if (target == "/v1/completions") return Route::kCompletions;
  if (target == "/v1/chat/completions") return Route::kChatCompletions;
  if (target == "/v1/embeddings") return Route::kEmbeddings;
  if (target == "/v1/responses") return Route::kResponses;
  if (target == "/v1/models") return Route::kModels;
  return Route::kUnknown;
}

// Inference paths take a POSTed JSON body and go through admission.
inline bool is_inference(Route r) {
  return r == Route::kCompletions || r == Route::kChatCompletions || r == Route::kEmbeddings ||
         r == Route::kResponses;
}

// True for "application/json" with optional parameters, in any letter case;
// an absent Content-Type is accepted (many SDKs omit it only for GETs, and a
// JSON parse error still catches a non-JSON body).
bool is_json_content_type(std::string_view value);

}  // namespace sluice::protocol
