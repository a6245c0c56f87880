#include "config/units.h"

#include <gtest/gtest.h>

namespace sluice::config {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration, GoSyntax) {
  EXPECT_EQ(parse_duration("500ms"), std::chrono::nanoseconds(500ms));
  EXPECT_EQ(parse_duration("30s"), std::chrono::nanoseconds(30s));
  EXPECT_EQ(parse_duration("1m30s"), std::chrono::nanoseconds(90s));
  EXPECT_EQ(parse_duration("1.5h"), std::chrono::nanoseconds(90min));
  EXPECT_EQ(parse_duration("250us"), std::chrono::nanoseconds(250us));
  EXPECT_EQ(parse_duration("0"), std::chrono::nanoseconds(0));
}

TEST(ParseDuration, RejectsGarbage) {
  for (const char* bad : {"", "abc", "10", "5 s", "-1s", "1x", "ms", "1s2"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(ParseQuantity, KubernetesSuffixes) {
  EXPECT_EQ(parse_quantity("5000"), 5000u);
  EXPECT_EQ(parse_quantity("8Mi"), 8ull << 20);
  EXPECT_EQ(parse_quantity("10Gi"), 10ull << 30);
  EXPECT_EQ(parse_quantity("2k"), 2000u);
  EXPECT_EQ(parse_quantity("1.5Ki"), 1536u);
  EXPECT_EQ(parse_quantity("0"), 0u);
}

TEST(ParseQuantity, RejectsGarbage) {
  for (const char* bad : {"", "abc", "-5", "1.5", "8MB", "Mi", "1.1Ki"}) {
    EXPECT_FALSE(parse_quantity(bad).has_value()) << bad;
  }
}

TEST(ParseHostPort, Forms) {
  auto a = parse_host_port("127.0.0.1:8080");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  auto b = parse_host_port("[::1]:0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  for (const char* bad : {"", "host", ":80", "host:", "host:99999", "host:8x", "::1:80"}) {
    EXPECT_FALSE(parse_host_port(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice::config
