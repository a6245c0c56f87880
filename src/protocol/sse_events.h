// Where Server-Sent Events end, so that the relay hands a client only whole
// events. An event ends with a blank line: a line terminator (CR LF, LF or
// CR) right after another (WHATWG HTML, "Server-sent events", 9.2.6). A
// client can do nothing with part of an event until its blank line comes,
// so holding the part back costs no latency; and a stream that ends early
// (an eviction, an upstream failure) can then close with an error event
// that parses, instead of one glued to half an event.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::protocol {

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

// One SSE stream's relay state (the exchange's, for its current response):
// what is held back of an unfinished event, and what the client holds.
// Pure, so its edges are unit-tested without a socket.
class SseEventHold {
 public:
  // Before a read's body is parsed: the bytes held back from the last read
  // go first in `body` (empty on entry). Returns how many: bytes known to
  // hold no event's end.
  std::size_t take(std::string& body) {
    const std::size_t n = held_.size();
    body += held_;
    held_.clear();
    return n;
  }
  // After a read (the stream goes on): `body` is cut after its last event's
  // end and the rest held for the next read, unless that rest is longer
  // than `max_hold` (an event that long goes out as it comes; the client
  // then holds part of it). `scanned`: what take() returned.
  void hold(std::string& body, std::size_t scanned, std::size_t max_hold) {
    if (body.empty()) return;  // (framing only: nothing changes for the client)
    const std::size_t whole = whole_events_length(body, scanned, at_line_start());
    if (whole < body.size() && body.size() - whole <= max_hold) {
      held_.assign(body, whole);
      body.resize(whole);
    }
    relayed(body);
  }
  // The stream ends early: `body` (this read's, not yet relayed) is cut to
  // whole events and what is held dropped. False when the client would
  // still hold part of an event: an error event may not follow then (it
  // would be read as the rest of that event).
  bool end(std::string& body) {
    body.resize(whole_events_length(body, 0, at_line_start()));
    held_.clear();
    relayed(body);
    return !mid_event_;
  }
  void reset() {
    // Its capacity goes too: an idle connection keeps nothing of a stream.
    std::string().swap(held_);
    mid_event_ = false;
    last_newline_ = true;
  }
  bool client_mid_event() const { return mid_event_; }
  bool holding() const { return !held_.empty(); }

 private:
  // Whether a line terminator first in the next bytes ends a blank line: at
  // an event's end, or when the last byte relayed ended a line with LF (a CR
  // may be the first half of CR LF: taken as no, which only holds back).
  bool at_line_start() const { return !mid_event_ || last_newline_; }
  // `bytes` went to the client.
  void relayed(const std::string& bytes) {
    if (bytes.empty()) return;
    const bool was_at_line_start = at_line_start();
    mid_event_ = whole_events_length(bytes, 0, was_at_line_start) != bytes.size();
    last_newline_ = bytes.back() == '\n';
  }

  std::string held_;
  bool mid_event_ = false;    // the client holds part of an event
  bool last_newline_ = true;  // the last byte relayed was LF
};

}  // namespace sluice::protocol
