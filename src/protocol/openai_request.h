// The fields of an OpenAI-style request body that admission, flow control and
// scheduling need, read on the I/O thread before admission.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/routes.h"

namespace sluice::protocol {

// The members of a body that limit its output tokens.
inline constexpr std::array<std::string_view, 3> kOutputLimitKeys = {
    "max_tokens", "max_completion_tokens", "max_output_tokens"};

// What a body says in one of kOutputLimitKeys (every occurrence of the key).
struct OutputLimit {
  bool present = false;   // a number, at least once
  bool has_null = false;  // null, at least once (the engine's default: no limit)
  std::int64_t max = 0;   // the largest number
};

struct OpenAIRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool stream_options = false;  // a top-level stream_options member, of any value
  // The output-token limits a body may carry: every engine reads one of
  // them first (vLLM: max_completion_tokens on chat, max_output_tokens on
  // /v1/responses, else max_tokens), so a ceiling must hold for each.
  // `max_tokens` is the largest value among all of them, every occurrence
  // of a repeated key included: what a tenant's ceiling is compared with and
  // what admission reserves from. Absent when none carries a number.
  std::optional<std::int64_t> max_tokens;
  std::array<OutputLimit, kOutputLimitKeys.size()> output_limits{};
  std::uint64_t prompt_chars = 0;      // characters of prompt text seen
  std::uint64_t prompt_token_ids = 0;  // tokens given directly as integer ids
  std::uint32_t message_count = 0;
  // How many answers the body asks for: the largest of `n` and `best_of`
  // (every occurrence; vLLM generates best_of sequences), at least 1. Each
  // may be as long as the output limit: a quota reserves them all.
  std::uint64_t choices = 1;
  // Prompts in a batched completion ("prompt" an array of strings or of
  // token-id arrays): each gets `choices` answers. At least 1.
  std::uint64_t prompts = 1;
  // A top-level "priority" member (vLLM's engine priority): present, and its
  // value when it is an integer. sluice never forwards a client's own to an
  // endpoint that schedules by it.
  bool has_priority = false;
  std::optional<std::int64_t> priority;
  // Estimate of input tokens: ~4 characters per token for text, one per
  // given token id, plus a small per-message overhead for chat templates.
  std::uint64_t estimated_input_tokens = 0;
};

struct ParseResult {
  OpenAIRequest request;
  // Empty on success; otherwise the OpenAI error `code` and a message for a 400.
  std::string error_code;
  std::string error_message;
  bool ok() const { return error_code.empty(); }
};

// Bytes the JSON parser reads past a body's end (simdjson's padding): a body
// buffer reserved with this much more is parsed without being copied.
inline constexpr std::size_t kJsonParserPadding = 64;

// Parses `body` (a JSON object). The string's capacity may be grown to give
// the JSON reader its required padding; its contents are not changed.
// If `prompt_text` is given, every piece of prompt text is appended to it,
// pieces separated by '\n' (for prefix hashing), up to `prompt_text_limit`
// characters (prefix hashing needs only the first blocks: no copy of a long
// prompt's tail). Never throws; all failures are returned as values.
ParseResult parse_openai_request(std::string& body, std::string* prompt_text = nullptr,
                                 std::size_t prompt_text_limit = SIZE_MAX);

}  // namespace sluice::protocol
