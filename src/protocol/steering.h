// Validation of steering header values at the trust boundary. Fairness ids,
// objective names and request ids are chosen by clients and become keys of
// flow-control tables, metric labels and log fields, so only a documented
// set of bytes passes: RFC 9110 token characters (letters, digits and
// !#$%&'*+-.^_`|~) plus ':', '/', '@' and '=' (for ids such as
// "org:team", "team/a", "user@example.com" or base64), 1 to `max_bytes` long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::protocol {

inline bool is_steering_byte(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
    case ':':
    case '/':
    case '@':
    case '=':
      return true;
    default:
      return false;
  }
}

inline bool is_valid_steering_value(std::string_view v, std::size_t max_bytes) {
  if (v.empty() || v.size() > max_bytes) return false;
  for (char c : v)
    if (!is_steering_byte(static_cast<unsigned char>(c))) return false;
  return true;
}

// Milliseconds in a header (x-gateway-inference-ttl-ms, x-slo-ttft-ms): a
// whole number, digits only, of any length; past kMaxHeaderMs (about 31
// years, already longer than any deadline) it is taken as kMaxHeaderMs.
// False for anything else (a sign, a point, a space, nothing).
inline constexpr std::uint64_t kMaxHeaderMs = 1'000'000'000'000;
inline bool parse_whole_ms(std::string_view v, std::uint64_t& out) {
  if (v.empty()) return false;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n >= kMaxHeaderMs ? kMaxHeaderMs : n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = n > kMaxHeaderMs ? kMaxHeaderMs : n;
  return true;
}

// The body's `model` (valid UTF-8 already, simdjson checks): at most
// `max_bytes`, no control characters (it is a metric label and a log field).
inline bool is_valid_model_name(std::string_view v, std::size_t max_bytes) {
  if (v.size() > max_bytes) return false;
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace sluice::protocol
