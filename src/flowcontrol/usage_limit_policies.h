// Usage-limit policies (llm-d's types and parameters): one dispatch ceiling
// per band from the pool's saturation. See UsageLimitPolicy in
// include/sluice/flowcontrol/policies.h for the contract.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "config/config.h"
#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

// static-usage-limit-policy: every band gets `threshold`.
class StaticUsageLimitPolicy final : public UsageLimitPolicy {
 public:
  explicit StaticUsageLimitPolicy(double threshold) : threshold_(threshold) {}
  std::string_view type() const override { return "static-usage-limit-policy"; }
  void compute(TimePoint now, double saturation, std::span<const int> priorities,
               std::span<double> ceilings) override;

 private:
  double threshold_;
};

// priority-holdback-policy: ceilings spread linearly from maxCeiling (the
// highest band) to minCeiling (the lowest), by rank or by priority value;
// one band alone gets maxCeiling. Domain explicit: a ceiling per priority
// (a band not listed takes the nearest listed band's above it, 1.0 above
// all; llm-d gives it 0.0). Saturation is not an input.
class PriorityHoldbackPolicy final : public UsageLimitPolicy {
 public:
  enum class Domain { kRank, kValue, kExplicit };
  PriorityHoldbackPolicy(double min_ceiling, double max_ceiling, Domain domain,
                         std::vector<std::pair<int, double>> explicit_ceilings = {});
  std::string_view type() const override { return "priority-holdback-policy"; }
  void compute(TimePoint now, double saturation, std::span<const int> priorities,
               std::span<double> ceilings) override;

 private:
  double min_, max_;
  Domain domain_;
  std::vector<std::pair<int, double>> explicit_;  // highest priority first
};

// soft-reflective-ceiling-policy: the top band is never held; band i of N
// (highest first) is open while saturation < 1 - i * saturation / (N - 1),
// closed at saturation 1, and in between open one millisecond in
// round(s / (1 - s)). llm-d decides on a 1 ms tick and alternates per
// tick; sluice decides on events, so the alternation is kept in time: a
// band opened at t stays shut until t + period ms.
class SoftReflectiveCeilingPolicy final : public UsageLimitPolicy {
 public:
  std::string_view type() const override { return "soft-reflective-ceiling-policy"; }
  void compute(TimePoint now, double saturation, std::span<const int> priorities,
               std::span<double> ceilings) override;

 private:
  std::vector<TimePoint> next_open_;  // per band rank
};

}  // namespace sluice::flowcontrol
