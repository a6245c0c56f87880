#include "config/units.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>

namespace sluice::config {
namespace {

// Reads a decimal number ("12", "1.5", ".5") from the front of text.
std::optional<double> take_number(std::string_view& text) {
  std::size_t i = 0;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i, digits = true;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i, digits = true;
  }
  if (!digits) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i) return std::nullopt;
  text.remove_prefix(i);
  return value;
}

}  // namespace

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  if (text == "0") return std::chrono::nanoseconds{0};
  if (text.empty()) return std::nullopt;
  long double total_ns = 0;
  while (!text.empty()) {
    auto number = take_number(text);
    if (!number) return std::nullopt;
    long double unit = 0;
    auto starts = [&](std::string_view u) {
      if (text.substr(0, u.size()) == u) {
        text.remove_prefix(u.size());
        return true;
      }
      return false;
    };
    if (starts("ns"))
      unit = 1;
    else if (starts("us") || starts("\xC2\xB5s"))
      unit = 1e3;
    else if (starts("ms"))
      unit = 1e6;
    else if (starts("s"))
      unit = 1e9;
    else if (starts("m"))
      unit = 60e9;
    else if (starts("h"))
      unit = 3600e9;
    else
      return std::nullopt;
    total_ns += *number * unit;
  }
  if (total_ns > 9.2e18L) return std::nullopt;
  return std::chrono::nanoseconds{static_cast<std::int64_t>(std::llround(total_ns))};
}

std::optional<std::uint64_t> parse_quantity(std::string_view text) {
  std::string_view rest = text;
  auto number = take_number(rest);
  if (!number) return std::nullopt;
  long double mult = 1;
  if (rest.empty()) {
  } else if (rest == "Ki")
    mult = 1024.0L;
  else if (rest == "Mi")
    mult = 1024.0L * 1024;
  else if (rest == "Gi")
    mult = 1024.0L * 1024 * 1024;
  else if (rest == "Ti")
    mult = 1024.0L * 1024 * 1024 * 1024;
  else if (rest == "Pi")
    mult = 1024.0L * 1024 * 1024 * 1024 * 1024;
  else if (rest == "Ei")
    mult = 1024.0L * 1024 * 1024 * 1024 * 1024 * 1024;
  else if (rest == "k")
    mult = 1e3L;
  else if (rest == "M")
    mult = 1e6L;
  else if (rest == "G")
    mult = 1e9L;
  else if (rest == "T")
    mult = 1e12L;
  else if (rest == "P")
    mult = 1e15L;
  else if (rest == "E")
    mult = 1e18L;
  else
    return std::nullopt;
  long double value = static_cast<long double>(*number) * mult;
  if (value > 1.8e19L) return std::nullopt;
  if (value != std::floor(value)) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::optional<std::uint64_t> parse_micro_units(std::string_view text) {
  // The value is digits * 10^exponent micro-units, computed in integers.
  int exponent = 6;
  if (!text.empty()) {
    switch (text.back()) {
      case 'm':
        exponent = 3;
        break;
      case 'k':
        exponent = 9;
        break;
      case 'M':
        exponent = 12;
        break;
      case 'G':
        exponent = 15;
        break;
      case 'T':
        exponent = 18;
        break;
      default:
        break;
    }
    if (exponent != 6) text.remove_suffix(1);
  }
  std::uint64_t digits = 0;
  // A fraction's zeros wait for a digit after them: trailing ones add
  // nothing (and are no 7th decimal).
  int zeros = 0;
  bool any = false, point = false;
  for (char ch : text) {
    if (ch == '.' && !point) {
      point = true;
      continue;
    }
    if (ch < '0' || ch > '9') return std::nullopt;
    any = true;
    if (point && ch == '0') {
      ++zeros;
      continue;
    }
    for (; zeros >= 0; --zeros) {  // the waiting zeros, then this digit
      const auto d = static_cast<std::uint64_t>(zeros == 0 ? ch - '0' : 0);
      if (digits > (UINT64_MAX - d) / 10) return std::nullopt;
      digits = digits * 10 + d;
      if (point) --exponent;
    }
    zeros = 0;
  }
  if (!any || exponent < 0) return std::nullopt;  // past 6 decimals
  for (; exponent > 0; --exponent) {
    if (digits > UINT64_MAX / 10) return std::nullopt;
    digits *= 10;
  }
  return digits;
}

std::string format_micro_units(std::uint64_t micros) {
  std::string out = std::to_string(micros / 1000000);
  std::string fraction = std::to_string(micros % 1000000);
  if (fraction == "0") return out;
  fraction.insert(0, 6 - fraction.size(), '0');
  while (fraction.back() == '0') fraction.pop_back();
  return out + "." + fraction;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;
  }
  if (host.empty() || port.empty()) return std::nullopt;
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value > 65535) return std::nullopt;
  return HostPort{host, static_cast<std::uint16_t>(value)};
}

std::optional<Cidr> parse_cidr(std::string_view text) {
  Cidr c;
  std::string_view addr = text;
  int prefix = -1;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    auto digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    prefix = 0;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return std::nullopt;
      prefix = prefix * 10 + (ch - '0');
    }
  }
  if (addr.empty() || addr.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string a(addr);
  unsigned char v4[4];
  if (::inet_pton(AF_INET, a.c_str(), v4) == 1) {
    if (prefix > 32) return std::nullopt;
    c.address[10] = c.address[11] = 0xff;
    std::copy(v4, v4 + 4, c.address.begin() + 12);
    c.prefix = prefix < 0 ? 128 : 96 + prefix;
  } else if (::inet_pton(AF_INET6, a.c_str(), c.address.data()) == 1) {
    if (prefix > 128) return std::nullopt;
    c.prefix = prefix < 0 ? 128 : prefix;
  } else {
    return std::nullopt;
  }
  // No host bits past the prefix.
  for (int bit = c.prefix; bit < 128; ++bit)
    if (c.address[static_cast<std::size_t>(bit / 8)] & (0x80 >> (bit % 8))) return std::nullopt;
  return c;
}

bool cidr_contains(const Cidr& block, const std::array<unsigned char, 16>& address) {
  const int whole = block.prefix / 8, rest = block.prefix % 8;
  for (int i = 0; i < whole; ++i)
    if (block.address[static_cast<std::size_t>(i)] != address[static_cast<std::size_t>(i)])
      return false;
  if (rest == 0) return true;
  const auto mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (block.address[static_cast<std::size_t>(whole)] & mask) ==
         (address[static_cast<std::size_t>(whole)] & mask);
}

}  // namespace sluice::config
