#include "protocol/sse_events.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::protocol {
namespace {

TEST(SseEvents, WholeEventsEndAtTheLastBlankLine) {
  EXPECT_EQ(whole_events_length(""), 0u);
  EXPECT_EQ(whole_events_length("data: a\n\n"), 9u);
  EXPECT_EQ(whole_events_length("data: a\n\ndata: b"), 9u);
  EXPECT_EQ(whole_events_length("data: a\n\ndata: b\n"), 9u);  // b's blank line is to come
  EXPECT_EQ(whole_events_length("data: a\n\ndata: b\n\n"), 18u);
  EXPECT_EQ(whole_events_length("data: {\"rid\": \"fac85"), 0u);
  // Every terminator the format allows, and mixes of them.
  EXPECT_EQ(whole_events_length("data: a\r\n\r\ndata: b"), 11u);
  EXPECT_EQ(whole_events_length("data: a\r\rdata: b"), 9u);
  EXPECT_EQ(whole_events_length("data: a\n\r\nx"), 10u);
  EXPECT_EQ(whole_events_length("data: a\r\n\nx"), 10u);
  EXPECT_EQ(whole_events_length("data: a\n\rx"), 9u);
  // One CR LF is one terminator, not a blank line.
  EXPECT_EQ(whole_events_length("data: a\r\n"), 0u);
  EXPECT_EQ(whole_events_length("data: a\r\ndata: b\r\n"), 0u);
  // Multi-line events and comments end only at the blank line.
  EXPECT_EQ(whole_events_length(": ping\ndata: a\ndata: b\n\nevent: x\n"), 24u);
}

TEST(SseEvents, ATerminatorFirstEndsABlankLineOnlyAtALineStart) {
  EXPECT_EQ(whole_events_length("\ndata: a"), 1u);
  EXPECT_EQ(whole_events_length("\ndata: a", 0, /*at_line_start=*/false), 0u);
  EXPECT_EQ(whole_events_length("\r\ndata: a", 0, false), 0u);
  EXPECT_EQ(whole_events_length("\n\ndata: a", 0, false), 2u);
}

TEST(SseEvents, ScanningFromWhereTheHeldPartEndsFindsTheSameEnd) {
  // An event that comes a few bytes a read: the held part is rescanned only
  // from its end, and the answer is the one a whole scan gives.
  const std::string stream = "data: one\r\n\r\n: c\ndata: two\n\ndata: three\r\rdata: fo";
  for (std::size_t step = 1; step <= 7; ++step) {
    std::string relayed, held;
    for (std::size_t at = 0; at < stream.size(); at += step) {
      std::string data = held + stream.substr(at, step);
      const std::size_t whole = whole_events_length(data, held.size());
      ASSERT_EQ(whole, whole_events_length(data)) << step << " " << at;
      relayed += data.substr(0, whole);
      held = data.substr(whole);
    }
    EXPECT_EQ(relayed, stream.substr(0, stream.size() - 8)) << step;
    EXPECT_EQ(held, "data: fo") << step;
  }
}

}  // namespace
}  // namespace sluice::protocol

namespace sluice::protocol {
namespace {

// The relay's state across reads (what the session does with each read).
TEST(SseEventHold, HoldsThePartOfAnEventAndSendsItWithTheRest) {
  SseEventHold h;
  std::string body = "data: a\n\ndata: b";
  h.hold(body, 0, 1024);
  EXPECT_EQ(body, "data: a\n\n");
  EXPECT_TRUE(h.holding());
  EXPECT_FALSE(h.client_mid_event());
  std::string next;
  const std::size_t held = h.take(next);
  EXPECT_EQ(held, 7u);
  next += "\n\n";
  h.hold(next, held, 1024);
  EXPECT_EQ(next, "data: b\n\n");
  EXPECT_FALSE(h.holding());
  // An early end with whole events only: the error event may follow.
  std::string none;
  EXPECT_TRUE(h.end(none));
}

TEST(SseEventHold, AnEarlyEndDropsThePartAndAllowsTheErrorEvent) {
  SseEventHold h;
  std::string body = "data: a\n\ndata: {\"rid\": \"fac85";
  EXPECT_TRUE(h.end(body));
  EXPECT_EQ(body, "data: a\n\n");
  SseEventHold held;
  std::string first = "data: {\"rid\": \"fac85";
  held.hold(first, 0, 1024);
  EXPECT_EQ(first, "");
  std::string empty;
  EXPECT_TRUE(held.end(empty));  // the held part is dropped, never relayed
  EXPECT_EQ(empty, "");
}

// An event longer than the hold goes out as it comes: the client holds part
// of it, and no error event may follow until it ends. A read that brings
// only chunk framing (no body bytes) changes nothing of that (it once
// cleared the flag, and the error event was glued to the long event).
TEST(SseEventHold, AfterALongEventOnlyItsEndAllowsTheErrorEvent) {
  SseEventHold h;
  std::string body = "data: " + std::string(100, 'x');
  h.hold(body, 0, 16);
  EXPECT_EQ(body.size(), 106u);  // relayed as it came
  EXPECT_TRUE(h.client_mid_event());
  std::string framing_only;
  h.hold(framing_only, 0, 16);
  EXPECT_TRUE(h.client_mid_event());
  std::string ending = "\n";  // the line ends; the event not yet: held
  h.hold(ending, 0, 16);
  EXPECT_EQ(ending, "");
  EXPECT_TRUE(h.holding());
  EXPECT_TRUE(h.client_mid_event());
  std::string nothing;
  EXPECT_FALSE(h.end(nothing));
  // After the long event's line ended with LF, a lone LF is its blank line.
  SseEventHold g;
  std::string long_line = "data: " + std::string(100, 'x') + "\n";
  g.hold(long_line, 0, 16);
  EXPECT_TRUE(g.client_mid_event());
  std::string blank = "\ndata: nex";
  g.hold(blank, 0, 16);
  EXPECT_EQ(blank, "\n");
  EXPECT_FALSE(g.client_mid_event());
  std::string rest;
  EXPECT_TRUE(g.end(rest));
  // After a CR the next LF may be the second half of CR LF: not taken as a
  // blank line (held back; at an early end, no error event).
  SseEventHold cr;
  std::string cr_line = "data: " + std::string(100, 'x') + "\r";
  cr.hold(cr_line, 0, 16);
  std::string lf = "\n";
  cr.hold(lf, 0, 16);
  EXPECT_TRUE(cr.client_mid_event());
  std::string end;
  EXPECT_FALSE(cr.end(end));
}

TEST(SseEventHold, ResetForgetsTheStream) {
  SseEventHold h;
  std::string body = "data: " + std::string(100, 'x');
  h.hold(body, 0, 16);
  std::string part = "data: y";
  h.hold(part, 0, 1000);
  h.reset();
  EXPECT_FALSE(h.client_mid_event());
  EXPECT_FALSE(h.holding());
}

}  // namespace
}  // namespace sluice::protocol
