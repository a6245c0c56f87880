#include "protocol/output_tokens.h"

#include <gtest/gtest.h>

namespace sluice::protocol {
namespace {

std::string stream(int tokens, bool usage) {
  std::string s;
  for (int i = 0; i < tokens; ++i)
    s += "data: {\"choices\":[{\"index\":0,\"text\":\" tok\",\"finish_reason\":null}]}\n\n";
  if (usage)
    s += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" +
         std::to_string(tokens) + ",\"total_tokens\":9}}\n\n";
  s += "data: [DONE]\n\n";
  return s;
}

TEST(OutputTokens, CountsSseEventsFedInAnySplit) {
  const std::string s = stream(57, false);
  for (std::size_t piece : {1u, 2u, 5u, 7u, 13u, 64u, 1000u}) {
    OutputTokenCounter c;
    for (std::size_t off = 0; off < s.size(); off += piece)
      c.feed(std::string_view(s).substr(off, piece));
    EXPECT_EQ(c.tokens(), 57u) << "piece " << piece;
  }
}

TEST(OutputTokens, UsageWinsWhenPresent) {
  const std::string s = stream(12, true);
  for (std::size_t piece : {1u, 3u, 9u, 4096u}) {
    OutputTokenCounter c;
    for (std::size_t off = 0; off < s.size(); off += piece)
      c.feed(std::string_view(s).substr(off, piece));
    EXPECT_EQ(c.tokens(), 12u) << "piece " << piece;
    EXPECT_TRUE(c.prompt_reported());
    EXPECT_EQ(c.prompt_tokens(), 7u) << "piece " << piece;
  }
}

// An engine's usage that is not a count (negative, a string, a float's
// sign, 20 digits) is not usage: the events counted stand (issue 41's bad
// input; the quota step then clamps what stands to the reservation).
TEST(OutputTokens, UsageThatIsNotACountLeavesTheEventsCount) {
  for (std::string_view bad :
       {R"(-5)", R"("12")", R"(null)", R"(99999999999999999999)", R"(123456789012345678901234)"}) {
    std::string s;
    for (int i = 0; i < 4; ++i) s += "data: {\"choices\":[{\"text\":\"x\"}]}\n\n";
    s += "data: {\"usage\":{\"prompt_tokens\":" + std::string(bad) +
         ",\"completion_tokens\":" + std::string(bad) + "}}\n\ndata: [DONE]\n\n";
    OutputTokenCounter c;
    c.feed(s);
    EXPECT_EQ(c.tokens(), 5u) << bad;  // four token events and the usage event
    EXPECT_FALSE(c.prompt_reported()) << bad;
  }
}

// The Responses API's usage: input_tokens and output_tokens (a plain
// answer has no events to count: without these it would count 0).
TEST(OutputTokens, ResponsesApiUsage) {
  OutputTokenCounter c;
  c.feed(R"({"object":"response","output":[{"type":"message"}],)");
  c.feed(R"("usage":{"input_tokens":50,"output_tokens":700,"total_tokens":750}})");
  EXPECT_EQ(c.tokens(), 700u);
  EXPECT_EQ(c.prompt_tokens(), 50u);
}

TEST(OutputTokens, PlainAnswerUsage) {
  OutputTokenCounter c;
  c.feed(R"({"choices":[{"text":"data: not an event"}],"usage":{"prompt_tokens":3,)");
  c.feed(R"("completion_tokens": 250,"total_tokens":253}})");
  EXPECT_EQ(c.tokens(), 250u);
  EXPECT_EQ(c.prompt_tokens(), 3u);
  c.reset();
  EXPECT_EQ(c.tokens(), 0u);
  EXPECT_FALSE(c.prompt_reported());
}

}  // namespace
}  // namespace sluice::protocol
