#include "flowcontrol/usage_limit_policies.h"

#include <algorithm>
#include <cmath>

namespace sluice::flowcontrol {

void StaticUsageLimitPolicy::compute(TimePoint, double, std::span<const int>,
                                     std::span<double> ceilings) {
  std::fill(ceilings.begin(), ceilings.end(), threshold_);
}

PriorityHoldbackPolicy::PriorityHoldbackPolicy(
    double min_ceiling, double max_ceiling, Domain domain,
    std::vector<std::pair<int, double>> explicit_ceilings)
    : min_(min_ceiling),
      max_(max_ceiling),
      domain_(domain),
      explicit_(std::move(explicit_ceilings)) {
  std::stable_sort(explicit_.begin(), explicit_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
}

void PriorityHoldbackPolicy::compute(TimePoint, double, std::span<const int> priorities,
                                     std::span<double> ceilings) {
  const std::size_t n = priorities.size();
  if (n == 0) return;
  if (domain_ == Domain::kExplicit) {
    // Both lists run highest first: one merge-like walk.
    std::size_t k = 0;
    double above = 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      while (k < explicit_.size() && explicit_[k].first > priorities[i])
        above = explicit_[k++].second;
      ceilings[i] =
          k < explicit_.size() && explicit_[k].first == priorities[i] ? explicit_[k].second : above;
    }
    return;
  }
  if (n == 1) {
    ceilings[0] = max_;
    return;
  }
  const double spread = max_ - min_;
  if (domain_ == Domain::kRank) {
    for (std::size_t i = 0; i < n; ++i)
      ceilings[i] = max_ - static_cast<double>(i) * spread / static_cast<double>(n - 1);
    return;
  }
  const double p_max = priorities[0], p_min = priorities[n - 1];
  if (p_max == p_min) {
    std::fill(ceilings.begin(), ceilings.end(), max_);
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    ceilings[i] = min_ + (static_cast<double>(priorities[i]) - p_min) / (p_max - p_min) * spread;
}

void SoftReflectiveCeilingPolicy::compute(TimePoint now, double saturation,
                                          std::span<const int> priorities,
                                          std::span<double> ceilings) {
  const std::size_t n = priorities.size();
  if (n == 0) return;
  ceilings[0] = 1.0;
  if (n == 1) return;
  if (next_open_.size() < n) next_open_.resize(n, TimePoint{});
  for (std::size_t i = 1; i < n; ++i) {
    const double reflective =
        1.0 - static_cast<double>(i) * saturation / static_cast<double>(n - 1);
    if (saturation < reflective) {
      ceilings[i] = 1.0;
    } else if (saturation >= 1.0) {
      ceilings[i] = 0.0;
    } else if (now >= next_open_[i]) {
      // Open now, then shut for `period` ms; 1e-9 keeps s just below 1 finite.
      const double period = std::max(1.0, std::round(saturation / (1.0 - saturation + 1e-9)));
      ceilings[i] = 1.0;
      next_open_[i] = now + std::chrono::duration_cast<Duration>(
                                std::chrono::duration<double, std::milli>(period));
    } else {
      ceilings[i] = 0.0;
    }
  }
}

}  // namespace sluice::flowcontrol
