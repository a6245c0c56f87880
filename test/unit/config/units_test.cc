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

// Issue 41, item 1: costs and prices, exact in micro-units.
TEST(ParseMicroUnits, ExactDecimals) {
  EXPECT_EQ(parse_micro_units("500"), 500000000u);
  EXPECT_EQ(parse_micro_units("0.25"), 250000u);
  EXPECT_EQ(parse_micro_units("0.15"), 150000u);  // not 149999: no binary fraction
  EXPECT_EQ(parse_micro_units("2.5"), 2500000u);
  EXPECT_EQ(parse_micro_units("500m"), 500000u);
  EXPECT_EQ(parse_micro_units("1.5k"), 1500000000u);
  EXPECT_EQ(parse_micro_units("0.000001"), 1u);
  EXPECT_EQ(parse_micro_units("0.0000010"), 1u);  // a trailing zero is no 7th decimal
  EXPECT_EQ(parse_micro_units(".5"), 500000u);
  EXPECT_EQ(parse_micro_units("0"), 0u);
  EXPECT_EQ(parse_micro_units("2M"), 2000000000000u);
  EXPECT_EQ(parse_micro_units("18446744073709.551615"), UINT64_MAX);
  EXPECT_EQ(parse_micro_units("18446744073709.55161500000"), UINT64_MAX);
  EXPECT_EQ(parse_micro_units("00000000000000000000001"), 1000000u);
}

TEST(ParseMicroUnits, RejectsInexactOverflowAndGarbage) {
  for (const char* bad :
       {"", ".", "m", "abc", "-1", "1e3", "0.0000001", "0.1234567", "1.5Ki", "1.2.3", "1 k",
        "18446744073709.551616", "18446744073710", "99999999999999999999999", "20T"}) {
    EXPECT_FALSE(parse_micro_units(bad).has_value()) << bad;
  }
}

TEST(ParseMicroUnits, FormatReadsBack) {
  for (std::uint64_t v : {0ull, 1ull, 150000ull, 2500000ull, 500000000ull, 18446744073709551615ull})
    EXPECT_EQ(parse_micro_units(format_micro_units(v)), v) << v;
  EXPECT_EQ(format_micro_units(250000), "0.25");
  EXPECT_EQ(format_micro_units(500000000), "500");
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
