#include "protocol/steering.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::protocol {
namespace {

// Issue 33, rough edge 10: whole numbers of any size are whole numbers
// (saturated past ~31 years), and nothing else is one.
TEST(Steering, MillisecondsAreAnyWholeNumberSaturatedAtTheBound) {
  std::uint64_t ms = 7;
  EXPECT_TRUE(parse_whole_ms("0", ms));
  EXPECT_EQ(ms, 0u);
  EXPECT_TRUE(parse_whole_ms("1500", ms));
  EXPECT_EQ(ms, 1500u);
  EXPECT_TRUE(parse_whole_ms("000042", ms));
  EXPECT_EQ(ms, 42u);
  EXPECT_TRUE(parse_whole_ms("999999999999", ms));
  EXPECT_EQ(ms, 999999999999u);
  EXPECT_TRUE(parse_whole_ms("1000000000001", ms));
  EXPECT_EQ(ms, kMaxHeaderMs);
  EXPECT_TRUE(parse_whole_ms("9223372036854775808", ms));  // 2^63
  EXPECT_EQ(ms, kMaxHeaderMs);
  EXPECT_TRUE(parse_whole_ms(std::string(400, '9'), ms));
  EXPECT_EQ(ms, kMaxHeaderMs);
  ms = 7;
  for (const char* bad : {"", "-1", "+1", "1.5", "1e3", " 1", "1 ", "0x10", "abc", "１"}) {
    EXPECT_FALSE(parse_whole_ms(bad, ms)) << bad;
    EXPECT_EQ(ms, 7u) << bad;
  }
}

}  // namespace
}  // namespace sluice::protocol
