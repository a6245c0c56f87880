#include "protocol/engine_priority.h"

#include <algorithm>
#include <vector>

namespace sluice::protocol {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skip_ws(std::string_view s, std::size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// s[i] is '"': the index after the closing quote.
std::size_t skip_string(std::string_view s, std::size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
      continue;
    }
    if (s[i] == '"') return i + 1;
  }
  return s.size();
}

// The index after the value starting at s[i].
std::size_t skip_value(std::string_view s, std::size_t i) {
  if (i >= s.size()) return s.size();
  if (s[i] == '"') return skip_string(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '"') {
        i = skip_string(s, i) - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return s.size();
  }
  while (i < s.size() && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
  return i;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether the JSON string literal `raw` (quotes included) decodes to `kKey`.
bool key_equals(std::string_view raw, std::string_view kKey) {
  std::size_t k = 0;
  for (std::size_t i = 1; i + 1 < raw.size(); ++i) {
    unsigned code = static_cast<unsigned char>(raw[i]);
    if (raw[i] == '\\') {
      if (i + 1 >= raw.size() - 1) return false;
      const char e = raw[++i];
      if (e == 'u') {
        if (i + 4 >= raw.size()) return false;
        int v = 0;
        for (int d = 0; d < 4; ++d) {
          const int h = hex(raw[i + 1 + static_cast<std::size_t>(d)]);
          if (h < 0) return false;
          v = v * 16 + h;
        }
        i += 4;
        code = static_cast<unsigned>(v);
      } else {
        code = static_cast<unsigned char>(e == 'n'   ? '\n'
                                          : e == 't' ? '\t'
                                          : e == 'r' ? '\r'
                                          : e == 'b' ? '\b'
                                          : e == 'f' ? '\f'
                                                     : e);
      }
    }
    if (k >= kKey.size() || code != static_cast<unsigned char>(kKey[k])) return false;
    ++k;
  }
  return k == kKey.size();
}

}  // namespace

std::string body_with_member(std::string_view body, std::span<const std::string_view> drop,
                             std::string_view key, std::int64_t value) {
  const Member put[] = {{key, value}};
  return body_with_members(body, drop, put);
}

std::string body_with_members(std::string_view body, std::span<const std::string_view> drop,
                              std::span<const Member> put) {
  const std::size_t open = skip_ws(body, 0);
  // Members to keep, as [begin, end) of their text (key through value).
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  bool dropped = false;
  std::size_t i = open + 1;
  std::size_t close = body.size();
  while (true) {
    i = skip_ws(body, i);
    if (i >= body.size()) break;
    if (body[i] == '}') {
      close = i;
      break;
    }
    if (body[i] == ',') {
      ++i;
      continue;
    }
    const std::size_t begin = i;
    const std::size_t key_end = skip_string(body, i);
    const auto raw_key = body.substr(begin, key_end - begin);
    const bool dropped_key = std::any_of(
        drop.begin(), drop.end(), [&](std::string_view k) { return key_equals(raw_key, k); });
    i = skip_ws(body, key_end);
    if (i < body.size() && body[i] == ':') ++i;
    i = skip_value(body, skip_ws(body, i));
    if (dropped_key) {
      dropped = true;
    } else {
      kept.emplace_back(begin, i);
    }
  }
  std::string out;
  out.reserve(body.size() + 32 * put.size());
  out.append(body.substr(0, open + 1));
  for (std::size_t m = 0; m < put.size(); ++m) {
    if (m > 0) out += ',';
    out += '"';
    out += put[m].key;
    out += "\":";
    out += std::to_string(put[m].value);
  }
  if (!dropped) {
    // Nothing removed: the rest goes as it came, in one piece.
    if (!kept.empty() && !put.empty()) out += ',';
    out.append(body.substr(kept.empty() ? close : kept.front().first));
    return out;
  }
  bool first = put.empty();
  for (const auto& [b, e] : kept) {
    if (!first) out += ',';
    first = false;
    out.append(body.substr(b, e - b));
  }
  out.append(body.substr(close));
  return out;
}

std::string body_with_priority(std::string_view body, std::int64_t priority) {
  static constexpr std::string_view kDrop[] = {"priority"};
  return body_with_member(body, kDrop, "priority", priority);
}

}  // namespace sluice::protocol
