// Where Server-Sent Events end, so that the relay hands a client only whole
// events. An event ends with a blank line: a line terminator (CR LF, LF or
// CR) right after another (WHATWG HTML, "Server-sent events", 9.2.6). A
// client can do nothing with part of an event until its blank line comes,
// so holding the part back costs no latency; and a stream that ends early
// (an eviction, an upstream failure) can then close with an error event
// that parses, instead of one glued to half an event.
#pragma once

#include <cstddef>
#include <string_view>

namespace sluice::server {

// The length of the longest prefix of `data` that ends at an event's end.
// `at_line_start`: `data` starts a line (the relay cuts only at events'
// ends), so a terminator first in it ends a blank line. Bytes before
// `scanned` are known to hold no event's end (the part held back from
// earlier reads), so only the rest is looked at. From the back: a stream's
// reads usually end at an event's end, found at once.
inline std::size_t whole_events_length(std::string_view data, std::size_t scanned = 0,
                                       bool at_line_start = true) {
  auto is_eol = [](char c) { return c == '\n' || c == '\r'; };
  for (std::size_t end = data.size(); end > scanned; --end) {
    const char last = data[end - 1];
    if (!is_eol(last)) continue;
    // The terminator that ends at `end` (CR LF counts as one), and what is
    // before it: another terminator, or the start of the data, makes the
    // line it ends blank.
    std::size_t before = end - 1;
    if (last == '\n' && before > 0 && data[before - 1] == '\r') --before;
    if (before == 0 ? at_line_start : is_eol(data[before - 1])) return end;
  }
  return 0;
}

}  // namespace sluice::server
