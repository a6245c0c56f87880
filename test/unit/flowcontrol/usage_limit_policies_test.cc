// The usage-limit policies against their formulas (llm-d's, as documented
// in docs/llm-d-flow-control.md).
#include "flowcontrol/usage_limit_policies.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(UsageLimitPolicies, SoftReflectiveFollowsItsFormula) {
  using namespace std::chrono_literals;
  // An independent oracle: per band, the time before which it stays shut.
  std::vector<TimePoint> next(4, TimePoint{});
  auto oracle = [&](TimePoint now, double s, std::size_t n) {
    std::vector<double> c(n, 1.0);
    for (std::size_t i = 1; i < n; ++i) {
      double r = 1.0 - static_cast<double>(i) * s / static_cast<double>(n - 1);
      if (s < r) continue;
      if (s >= 1.0 || now < next[i]) {
        c[i] = 0.0;
        continue;
      }
      double period_ms = std::max(1.0, std::round(s / (1.0 - s + 1e-9)));
      next[i] = now + std::chrono::microseconds(static_cast<long>(period_ms * 1000));
    }
    return c;
  };
  SoftReflectiveCeilingPolicy p;
  TimePoint now{};
  for (int step = 0; step < 2000; ++step) {
    now += 250us;
    const double s = (step / 7 % 23) / 20.0;  // 0 .. 1.1, each held for 7 calls
    ASSERT_EQ(run(p, s, {3, 2, 1, 0}, now), oracle(now, s, 4)) << "step " << step << " s " << s;
  }
  SoftReflectiveCeilingPolicy one;
  EXPECT_EQ(run(one, 1.0, {9}), (std::vector<double>{1.0}));
  // Two bands at s = 0.75 (period 3 ms), asked every 0.5 ms for 30 ms: the
  // low band is open 10 times; at 0.4 (below 1 - 0.4) always; at 1.0 never.
  for (auto [s, want] : {std::pair{0.75, 10}, {0.4, 60}, {1.0, 0}}) {
    SoftReflectiveCeilingPolicy two;
    int open = 0;
    TimePoint t{};
    for (int k = 0; k < 60; ++k, t += 500us) open += run(two, s, {1, 0}, t)[1] == 1.0;
    EXPECT_EQ(open, want) << "s " << s;
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
