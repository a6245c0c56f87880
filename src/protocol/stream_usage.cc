#include "protocol/stream_usage.h"

#include <simdjson.h>

#include <string>

namespace sluice::protocol {

std::string body_with_stream_usage(std::string_view body) {
  static constexpr std::string_view kMember = R"("stream_options":{"include_usage":true})";
  std::size_t open = 0;
  while (open < body.size() && body[open] != '{') ++open;
  if (open == body.size()) return std::string(body);
  std::size_t next = open + 1;
  while (next < body.size() &&
         (body[next] == ' ' || body[next] == '\t' || body[next] == '\n' || body[next] == '\r'))
    ++next;
  std::string out;
  out.reserve(body.size() + kMember.size() + 1);
  out.append(body.substr(0, open + 1));
  out.append(kMember);
  if (next < body.size() && body[next] != '}') out += ',';
  out.append(body.substr(open + 1));
  return out;
}

namespace {

// The end of the line starting at `i` (its terminator included: CR LF, LF
// or CR), and whether the line was empty.
std::size_t line_end(std::string_view s, std::size_t i, bool& empty) {
  const std::size_t start = i;
  while (i < s.size() && s[i] != '\n' && s[i] != '\r') ++i;
  empty = i == start;
  if (i < s.size()) i += s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
  return i;
}

// One event's data: a usage event?
bool is_usage_event(std::string_view event) {
  if (event.find("usage") == std::string_view::npos) return false;
  // Its data lines, joined by LF (an event has one in practice).
  std::string data;
  std::size_t i = 0;
  while (i < event.size()) {
    bool empty = false;
    const std::size_t end = line_end(event, i, empty);
    std::string_view line = event.substr(i, end - i);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    if (line.substr(0, 5) == "data:") {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (!data.empty()) data += '\n';
      data.append(line);
    }
    i = end;
  }
  if (data.empty() || data.size() > (1u << 20)) return false;
  // One parser a thread, its buffers reused (an event that names "usage"
  // in its text comes to this; few are usage events).
  static thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(data).get(doc)) return false;
  simdjson::dom::array choices;
  simdjson::dom::object usage;
  if (doc["choices"].get_array().get(choices) || choices.size() != 0) return false;
  return doc["usage"].get_object().get(usage) == simdjson::SUCCESS;
}

}  // namespace

std::size_t drop_usage_events(std::string& body, std::size_t whole) {
  const std::string_view s(body.data(), std::min(whole, body.size()));
  std::string out;
  std::size_t removed = 0, i = 0, event_start = 0, copied = 0;
  while (i < s.size()) {
    bool empty = false;
    const std::size_t end = line_end(s, i, empty);
    if (empty) {
      // An event ends here (its blank line included).
      const std::string_view event = s.substr(event_start, end - event_start);
      if (is_usage_event(event)) {
        out.append(s.substr(copied, event_start - copied));
        copied = end;
        removed += event.size();
      }
      event_start = end;
    }
    i = end;
  }
  if (removed == 0) return 0;
  out.append(body, copied, std::string::npos);
  body.swap(out);
  return removed;
}

}  // namespace sluice::protocol
