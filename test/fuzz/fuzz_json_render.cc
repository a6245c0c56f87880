// Rendering client-chosen bytes as JSON (STYLE.md: anything rendered escapes
// or replaces invalid bytes and never throws). Two oracles:
//  - nlohmann's dump with error_handler_t::replace never throws;
//  - the escaper shared by the error bodies and the access log
//    (flowcontrol::append_json_string) always produces a JSON string that a
//    strict parser accepts, and one that reads back as the input when the
//    input was valid UTF-8.
// A violation aborts with the rendered text, so the input becomes an artifact.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "flowcontrol/outcome_response.h"

namespace {

[[noreturn]] void violation(const char* what, const std::string& rendered) {
  std::fprintf(stderr, "FINDING: %s\nrendered (%zu bytes): ", what, rendered.size());
  for (unsigned char c : rendered) {
    if (c >= 0x20 && c < 0x7f)
      std::fputc(c, stderr);
    else
      std::fprintf(stderr, "\\x%02x", c);
  }
  std::fputc('\n', stderr);
  std::abort();
}

bool is_valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  std::string dumped;
  try {
    dumped = nlohmann::json(input).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    violation(e.what(), input);
  }
  if (!nlohmann::json::accept(dumped)) violation("nlohmann's replace dump is not JSON", dumped);

  std::string escaped;
  sluice::flowcontrol::append_json_string(escaped, input);
  if (!nlohmann::json::accept(escaped))
    violation("append_json_string produced text that is not valid JSON", escaped);
  if (is_valid_utf8(input) && nlohmann::json::parse(escaped).get<std::string>() != input)
    violation("append_json_string changed valid UTF-8 text", escaped);

  // The same escaper inside a whole error body, as a client receives it.
  const std::string body = sluice::flowcontrol::openai_error_body(input, "invalid_request_error",
                                                                  std::string_view(input));
  if (!nlohmann::json::accept(body)) violation("openai_error_body is not valid JSON", body);
  return 0;
}
