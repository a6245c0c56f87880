// The one place where a non-dispatched outcome becomes an HTTP answer
// (status, reason header, Retry-After, OpenAI error body); Pingora's
// fail_to_proxy idea. The server layer renders it; nothing else decides it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/flowcontrol/outcome.h"

namespace sluice::flowcontrol {

struct ErrorAnswer {
  int status = 500;
  std::string_view reason;  // x-gateway-inference-dropped-reason; may be empty
  // x-llm-d-request-dropped-reason, llm-d's name and value for the same
  // outcome (llm-d clients read this one); may be empty.
  std::string_view llmd_reason;
  std::string_view code;        // the error code (the body's), for logs and metrics
  int retry_after_seconds = 0;  // 0: no Retry-After header
  // WWW-Authenticate on a 401 (RFC 6750: `Bearer realm="sluice"`); may be empty.
  std::string www_authenticate;
  bool close_connection = false;
  // More header fields, as they are (a quota's x-ratelimit-*,
  // retry-after-ms, x-should-retry); built only on a refusal.
  std::vector<std::pair<std::string_view, std::string>> headers;
  std::string body;  // {"error":{"message":...,"type":...,"code":...}}
};

// Appends `s` as a JSON string: quoted, with quotes, backslashes and
// control characters escaped, and every byte that is not part of a
// well-formed UTF-8 sequence replaced by U+FFFD, so the output is always
// valid JSON whatever bytes a client sent. Never throws.
void append_json_string(std::string& out, std::string_view s);

// OpenAI-shaped error body. `code` may be empty (then JSON null).
std::string openai_error_body(std::string_view message, std::string_view type,
                              std::string_view code);

// Answer for a request that was not dispatched. Must not be called with
// kDispatched or kEvictedContextCancelled (no one is left to answer).
ErrorAnswer answer_for(QueueOutcome outcome, std::string_view detail = {});

// Answer for a client error detected before admission (400, 404, 405, 413, 431...).
ErrorAnswer client_error(int status, std::string_view code, std::string_view message);

}  // namespace sluice::flowcontrol
