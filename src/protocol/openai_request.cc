#include "protocol/openai_request.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>

namespace sluice::protocol {

static_assert(kJsonParserPadding >= simdjson::SIMDJSON_PADDING);

bool is_json_content_type(std::string_view v) {
  if (v.empty()) return true;
  auto semi = v.find(';');
  auto type = v.substr(0, semi);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  if (type.size() != kJson.size()) return false;
  for (std::size_t i = 0; i < kJson.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(type[i])) != kJson[i]) return false;
  return true;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Counts prompt text in a value that is a string, an array of strings, an
// array of token ids, an array of arrays of token ids, or content parts /
// input items ({"type":"text","text":...}, {"role":...,"content":...}).
void count_prompt(element v, OpenAIRequest& r, std::string* text, std::size_t limit,
                  int depth = 0) {
  if (depth > 8) return;
  switch (v.type()) {
    case element_type::STRING: {
      std::string_view s = v.get_string().value_unsafe();
      r.prompt_chars += s.size();
      if (text && text->size() < limit) {
        if (!text->empty()) text->push_back('\n');
        text->append(s.substr(0, limit - std::min(limit, text->size())));
      }
      break;
    }
    case element_type::INT64:
    case element_type::UINT64:
      r.prompt_token_ids += 1;
      break;
    case element_type::ARRAY: {
      // Bind the array first: ranging over value_unsafe() of a temporary
      // result would dangle.
      simdjson::dom::array arr = v.get_array().value_unsafe();
      for (element item : arr) count_prompt(item, r, text, limit, depth + 1);
      break;
    }
    case element_type::OBJECT: {
      simdjson::dom::object obj = v.get_object().value_unsafe();
      for (auto [key, value] : obj) {
        if (key == "text" || key == "content" || key == "input_text")
          count_prompt(value, r, text, limit, depth + 1);
      }
      break;
    }
    default:
      break;  // null, bool, double: no prompt text
  }
}

std::size_t output_limit_index(std::string_view key) {
  for (std::size_t i = 0; i < kOutputLimitKeys.size(); ++i)
    if (key == kOutputLimitKeys[i]) return i;
  return kOutputLimitKeys.size();
}

ParseResult fail(std::string code, std::string message) {
  ParseResult p;
  p.error_code = std::move(code);
  p.error_message = std::move(message);
  return p;
}

// `n` or `best_of`: a whole number of at least 1 (an engine's lax JSON
// would read 2.0 as 2: so does this), or null; anything else is refused
// (false) rather than read differently by the engine. The largest is kept.
bool read_choices(simdjson::dom::element v, OpenAIRequest& r) {
  if (v.is_null()) return true;
  std::int64_t n = 0;
  double d = 0;
  if (v.get_int64().get(n) != simdjson::SUCCESS) {
    if (v.get_double().get(d) != simdjson::SUCCESS || !(d >= 1 && d <= 1e9) ||
        d != static_cast<double>(static_cast<std::int64_t>(d)))
      return false;
    n = static_cast<std::int64_t>(d);
  }
  if (n < 1) return false;
  r.choices = std::max(r.choices, static_cast<std::uint64_t>(n));
  return true;
}

}  // namespace

ParseResult parse_openai_request(std::string& body, std::string* prompt_text,
                                 std::size_t prompt_text_limit) {
  // One parser per I/O thread: its buffers are reused across requests.
  thread_local simdjson::dom::parser parser;
  if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING)
    body.reserve(body.size() + simdjson::SIMDJSON_PADDING);

  element doc;
  if (auto e = parser.parse(body.data(), body.size(), false).get(doc)) {
    return fail("invalid-json",
                std::string("request body is not valid JSON: ") + simdjson::error_message(e));
  }
  simdjson::dom::object root;
  if (doc.get_object().get(root)) return fail("invalid-json", "request body must be a JSON object");

  ParseResult out;
  OpenAIRequest& r = out.request;
  bool has_model = false;
  for (auto [key, v] : root) {
    if (key == "model") {
      std::string_view m;
      if (v.get_string().get(m)) return fail("invalid-field", "'model' must be a string");
      r.model.assign(m);
      has_model = true;
    } else if (key == "stream") {
      bool b = false;
      if (v.get_bool().get(b)) return fail("invalid-field", "'stream' must be a boolean");
      r.stream = b;
    } else if (key == "stream_options") {
      r.stream_options = true;
      bool b = false;
      if (v.is_object() && v["include_usage"].get_bool().get(b) == simdjson::SUCCESS)
        r.include_usage = b;
    } else if (const std::size_t limit = output_limit_index(key); limit < kOutputLimitKeys.size()) {
      OutputLimit& o = r.output_limits[limit];
      if (v.is_null()) {
        o.has_null = true;
        continue;
      }
      std::int64_t n = 0;
      if (v.get_int64().get(n) || n < 0)
        return fail("invalid-field",
                    "'" + std::string(key) + "' must be a non-negative integer or null");
      o.max = o.present ? std::max(o.max, n) : n;
      o.present = true;
      r.max_tokens = r.max_tokens ? std::max(*r.max_tokens, n) : n;
    } else if (key == "n" || key == "best_of") {
      if (!read_choices(v, r))
        return fail("invalid-field", "'" + std::string(key) + "' must be a positive integer");
    } else if (key == "priority") {
      r.has_priority = true;
      std::int64_t n = 0;
      if (v.get_int64().get(n) == simdjson::SUCCESS) r.priority = n;
    } else if (key == "prompt" || key == "input") {
      count_prompt(v, r, prompt_text, prompt_text_limit);
      simdjson::dom::array batch;
      if (key == "prompt" && v.get_array().get(batch) == simdjson::SUCCESS && batch.size() > 0 &&
          !batch.at(0).is_int64() && !batch.at(0).is_uint64())
        r.prompts = std::max<std::uint64_t>(r.prompts, batch.size());
    } else if (key == "messages") {
      simdjson::dom::array messages;
      if (v.get_array().get(messages))
        return fail("invalid-field", "'messages' must be an array of message objects");
      for (element m : messages) {
        if (!m.is_object())
          return fail("invalid-field", "'messages' must be an array of message objects");
        r.message_count += 1;
        element content;
        if (m["content"].get(content) == simdjson::SUCCESS)
          count_prompt(content, r, prompt_text, prompt_text_limit);
      }
    }
    // Any other field is forwarded untouched and not inspected.
  }
  if (!has_model || r.model.empty())
    return fail("missing-model", "request body must name a 'model'");
  r.estimated_input_tokens = (r.prompt_chars + 3) / 4 + r.prompt_token_ids + 3ull * r.message_count;
  return out;
}

}  // namespace sluice::protocol
