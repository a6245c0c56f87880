// The usage-limit policies against their formulas and properties (llm-d's,
// as documented in docs/llm-d-flow-control.md and the README).
#include "flowcontrol/usage_limit_policies.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "flowcontrol/from_config.h"

namespace sluice::flowcontrol {
namespace {

std::vector<double> run(UsageLimitPolicy& p, double saturation, std::vector<int> priorities,
                        TimePoint now = TimePoint{}) {
  std::vector<double> c(priorities.size(), 1.0);
  p.compute(now, saturation, priorities, c);
  return c;
}

TEST(UsageLimitPolicies, Static) {
  StaticUsageLimitPolicy p(0.8);
  EXPECT_EQ(run(p, 0.3, {10, 0, -5}), (std::vector<double>{0.8, 0.8, 0.8}));
  EXPECT_TRUE(run(p, 0.3, {}).empty());
}

TEST(UsageLimitPolicies, HoldbackRank) {
  PriorityHoldbackPolicy p(0.2, 1.0, PriorityHoldbackPolicy::Domain::kRank);
  // c_i = max - i (max - min) / (N - 1), whatever the priority values.
  auto c = run(p, 0.0, {1000, 3, 2, -7, -900});
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], 1.0 - 0.2 * i, 1e-12);
  EXPECT_EQ(run(p, 0.9, {5}), (std::vector<double>{1.0}));  // one band: maxCeiling
  // Saturation is not an input.
  EXPECT_EQ(run(p, 0.0, {1, 0}), run(p, 1.0, {1, 0}));
}

TEST(UsageLimitPolicies, HoldbackValue) {
  PriorityHoldbackPolicy p(0.5, 0.9, PriorityHoldbackPolicy::Domain::kValue);
  // c_i = min + (p_i - pMin) / (pMax - pMin) (max - min).
  auto c = run(p, 0.0, {100, 75, 0});
  EXPECT_NEAR(c[0], 0.9, 1e-12);
  EXPECT_NEAR(c[1], 0.5 + 0.75 * 0.4, 1e-12);
  EXPECT_NEAR(c[2], 0.5, 1e-12);
  EXPECT_EQ(run(p, 0.0, {7}), (std::vector<double>{0.9}));
}

TEST(UsageLimitPolicies, HoldbackExplicitTakesTheNearestListedBandAbove) {
  PriorityHoldbackPolicy p(0, 1, PriorityHoldbackPolicy::Domain::kExplicit,
                           {{0, 0.7}, {100, 1.0}, {-10, 0.4}});
  // 200 is above every listed band: 1.0; 50 takes 100's; -5 takes 0's;
  // -20 takes -10's.
  EXPECT_EQ(run(p, 0.5, {200, 100, 50, 0, -5, -10, -20}),
            (std::vector<double>{1.0, 1.0, 1.0, 0.7, 0.7, 0.4, 0.4}));
  EXPECT_EQ(run(p, 0.5, {0}), (std::vector<double>{0.7}));  // no single-band bypass
}

// soft-reflective-ceiling-policy, checked by the properties its
// documentation (README's table, docs/llm-d-flow-control.md, and
// usage_limit_policies.h for the period kept in time) promises, with the
// expected values worked out by hand, not by running its expression:
//   band 0 is never held; band i of N (i >= 1) is always open while
//   s < 1 - i*s/(N-1), i.e. while s < (N-1)/(N-1+i); shut at s >= 1; in
//   between it opens once every p = max(1, round(s/(1-s))) ms.
// The policy is asked every `kAsk` (finer than any period), as the
// dispatcher asks on events: a band that opens once per p ms is then open
// at 1000/p asks a second, and one always open at all 4000.
constexpr Duration kAsk = std::chrono::microseconds(250);

// The times each band was open when a fresh policy is asked every `ask`
// for `span` at saturation `s`, about `bands` bands.
std::vector<std::vector<TimePoint>> openings(double s, std::size_t bands, Duration span,
                                             Duration ask = kAsk) {
  SoftReflectiveCeilingPolicy p;
  std::vector<int> priorities;
  for (std::size_t i = 0; i < bands; ++i) priorities.push_back(static_cast<int>(bands - i));
  std::vector<std::vector<TimePoint>> open(bands);
  for (TimePoint t = TimePoint{} + ask; t <= TimePoint{} + span; t += ask) {
    const auto c = run(p, s, priorities, t);
    for (std::size_t i = 0; i < bands; ++i) {
      // A ceiling is a gate here: open (1.0) or shut (0.0), nothing else.
      EXPECT_TRUE(c[i] == 0.0 || c[i] == 1.0) << "band " << i << " s " << s << ": " << c[i];
      if (c[i] == 1.0) open[i].push_back(t);
    }
  }
  return open;
}

TEST(UsageLimitPolicies, SoftReflectiveNeverHoldsTheTopBand) {
  for (std::size_t n : {1u, 2u, 4u})
    for (double s : {0.0, 0.5, 0.75, 0.99, 1.0, 1.5}) {
      const auto open = openings(s, n, std::chrono::milliseconds(20));
      EXPECT_EQ(open[0].size(), 80u) << n << " bands, s " << s;
    }
}

// Openings per second of run, per (bands, band, s), worked out by hand.
// Tolerance: one opening (the period cut by the end of the 2 s window);
// none for a band always open or shut.
// No point sits where s/(1-s) is a half (0.6: 1.5), where the rounding
// is floating point's call (llm-d's Go gets 1 there too).
TEST(UsageLimitPolicies, SoftReflectiveOpensAtItsDocumentedRate) {
  struct Point {
    std::size_t bands, band;
    double s;
    double per_second;
    const char* why;
  };
  const Point points[] = {
      // Two bands: band 1 is always open below s = 1/2.
      {2, 1, 0.0, 4000, "empty pool: always open"},
      {2, 1, 0.3, 4000, "0.3 < 1 - 0.3"},
      {2, 1, 0.49, 4000, "0.49 < 0.51"},
      {2, 1, 0.51, 1000, "0.51/0.49 = 1.04: every 1 ms"},
      {2, 1, 0.62, 500, "0.62/0.38 = 1.63, rounded to 2 ms"},
      {2, 1, 0.7, 500, "0.7/0.3 = 2.33, rounded to 2 ms"},
      {2, 1, 0.75, 1000.0 / 3, "0.75/0.25 = 3 ms"},
      {2, 1, 0.8, 250, "0.8/0.2 = 4 ms"},
      {2, 1, 0.9, 1000.0 / 9, "0.9/0.1 = 9 ms"},
      {2, 1, 0.95, 1000.0 / 19, "0.95/0.05 = 19 ms"},
      {2, 1, 1.0, 0, "full: shut"},
      {2, 1, 1.3, 0, "over full: shut"},
      // Four bands: bands 1, 2, 3 always open below 3/4, 3/5, 1/2.
      {4, 1, 0.55, 4000, "0.55 < 1 - 0.55/3"},
      {4, 2, 0.55, 4000, "0.55 < 1 - 2 * 0.55/3 = 0.633"},
      {4, 3, 0.55, 1000, "0.55 >= 1 - 0.55 = 0.45; 0.55/0.45 = 1.22: 1 ms"},
      {4, 1, 0.65, 4000, "0.65 < 1 - 0.65/3 = 0.783"},
      {4, 2, 0.65, 500, "0.65 >= 1 - 2 * 0.65/3 = 0.567; 0.65/0.35 = 1.86: 2 ms"},
      {4, 3, 0.65, 500, "0.65/0.35 = 1.86: 2 ms"},
      {4, 1, 0.8, 250, "0.8 >= 1 - 0.8/3 = 0.733; 4 ms"},
      {4, 3, 0.8, 250, "4 ms"},
      {4, 2, 1.0, 0, "full: shut"},
  };
  const Duration span = std::chrono::seconds(2);
  for (const auto& pt : points) {
    const auto open = openings(pt.s, pt.bands, span);
    const bool exact = pt.per_second == 0 || pt.per_second == 4000;
    EXPECT_NEAR(static_cast<double>(open[pt.band].size()), pt.per_second * 2, exact ? 0.0 : 1.0)
        << "band " << pt.band << " of " << pt.bands << " at s " << pt.s << " (" << pt.why << ")";
  }
}

// Between its openings a band is shut for exactly its period: asked every
// 0.25 ms, openings are p ms apart; asked at a step that does not divide p
// (0.7 ms), each opening is the first ask at least p ms after the last.
TEST(UsageLimitPolicies, SoftReflectiveOpeningsAreOnePeriodApart) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  for (auto [s, period] : {std::pair{0.62, milliseconds(2)},
                           {0.75, milliseconds(3)},
                           {0.9, milliseconds(9)},
                           {0.99, milliseconds(99)}}) {
    for (Duration ask : {Duration(microseconds(250)), Duration(microseconds(700))}) {
      const auto open = openings(s, 2, std::chrono::seconds(1), ask)[1];
      ASSERT_GE(open.size(), 2u) << "s " << s;
      EXPECT_EQ(open[0], TimePoint{} + ask) << "s " << s << ": the first ask opens";
      for (std::size_t k = 1; k < open.size(); ++k) {
        const Duration gap = open[k] - open[k - 1];
        EXPECT_GE(gap, period) << "s " << s << " opening " << k;
        EXPECT_LT(gap, period + ask) << "s " << s << " opening " << k;
      }
    }
  }
}

// Over a sweep of saturation (N = 5): a band is never open more often at a
// higher saturation, nor a lower band more often than the one above it;
// always open below (N-1)/(N-1+i), never at or past 1.
TEST(UsageLimitPolicies, SoftReflectiveIsMonotoneInSaturationAndRank) {
  constexpr std::size_t kBands = 5;
  const Duration span = std::chrono::milliseconds(500);
  const std::size_t asks = 2000;  // in `span`
  std::vector<std::size_t> before(kBands, asks);
  for (int k = 0; k <= 120; ++k) {
    const double s = k / 100.0;
    const auto open = openings(s, kBands, span);
    for (std::size_t i = 0; i < kBands; ++i) {
      EXPECT_LE(open[i].size(), before[i]) << "band " << i << " opens more at s " << s;
      before[i] = open[i].size();
      if (i == 0) continue;
      EXPECT_LE(open[i].size(), open[i - 1].size()) << "band " << i << " at s " << s;
      const double threshold = 4.0 / (4.0 + static_cast<double>(i));
      // Exactly at a threshold the policy's rounding decides: not asserted.
      if (std::abs(s - threshold) < 1e-9) continue;
      if (s < threshold) {
        EXPECT_EQ(open[i].size(), asks) << "band " << i << " below its threshold, s " << s;
      } else if (s >= 1.0) {
        EXPECT_EQ(open[i].size(), 0u) << "band " << i << " at s " << s;
      } else {
        EXPECT_LT(open[i].size(), asks) << "band " << i << " past its threshold, s " << s;
      }
    }
  }
}

TEST(UsageLimitPolicies, MadeFromTheirSpec) {
  config::UsageLimitSpec s;
  EXPECT_EQ(make_usage_limit_policy(s), nullptr);
  s.type = "static-usage-limit-policy";
  EXPECT_EQ(make_usage_limit_policy(s)->type(), "static-usage-limit-policy");
  s.type = "priority-holdback-policy";
  EXPECT_EQ(make_usage_limit_policy(s)->type(), "priority-holdback-policy");
  s.type = "soft-reflective-ceiling-policy";
  EXPECT_EQ(make_usage_limit_policy(s)->type(), "soft-reflective-ceiling-policy");
}

}  // namespace
}  // namespace sluice::flowcontrol
