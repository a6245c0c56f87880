#include "server/sse_events.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::server {
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
}  // namespace sluice::server
