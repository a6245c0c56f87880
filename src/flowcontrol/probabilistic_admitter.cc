#include "flowcontrol/probabilistic_admitter.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice::flowcontrol {

ProbabilisticAdmitter::ProbabilisticAdmitter(ProbabilisticAdmitterParams params, std::uint64_t seed)
    : params_(params), rng_(seed) {}

ProbabilisticAdmitter::ProbabilisticAdmitter(ProbabilisticAdmitterParams params,
                                             std::function<double()> uniform)
    : params_(params), uniform_(std::move(uniform)) {}

double ProbabilisticAdmitter::draw() { return uniform_ ? uniform_() : unit_(rng_); }

double ProbabilisticAdmitter::saturation(std::span<const EndpointLoad> pool,
                                         std::span<const std::uint8_t> gone) const {
  double total = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < pool.size(); ++i) {
    if (i < gone.size() && gone[i]) continue;
    ++n;
    const EndpointLoad& e = pool[i];
    if (!e.has_metrics) {
      total += 1.0;  // llm-d: an endpoint without metrics is fully saturated
      continue;
    }
    total += std::max(e.waiting / params_.queue_depth_threshold,
                      e.kv_cache_usage / params_.kv_cache_util_threshold);
  }
  return n == 0 ? -1.0 : total / static_cast<double>(n);
}

double ProbabilisticAdmitter::shed_probability(double saturation) const {
  if (!(saturation > 0)) return 0.0;
  return std::min(std::pow(saturation, params_.power) * params_.k, 1.0);
}

bool ProbabilisticAdmitter::admit(int priority, std::span<const EndpointLoad> pool,
                                  std::span<const std::uint8_t> gone) {
  if (priority >= 0) return true;
  const double s = saturation(pool, gone);
  if (s < 0) return true;  // no endpoint: admit (llm-d's safe default)
  // Drawn only for sheddable requests on a non-empty pool, as llm-d does:
  // a seeded sequence of decisions depends on those requests only.
  return !(draw() < shed_probability(s));
}

}  // namespace sluice::flowcontrol
