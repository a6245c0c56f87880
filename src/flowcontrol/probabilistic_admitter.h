// probabilistic-admitter (llm-d's requestcontrol admitter of that name):
// requests of priority 0 and above are always admitted; a sheddable one
// (priority below 0) is refused with probability
//   p = min(saturation^power * k, 1)
// where saturation is the mean over the pool's endpoints of
//   max(waiting / queueDepthThreshold, kvCacheUsage / kvCacheUtilThreshold)
// and an endpoint without metrics counts as 1 (fully saturated). An empty
// pool admits (the controller answers no-endpoints itself).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string_view>

#include "sluice/flowcontrol/admitter.h"

namespace sluice::flowcontrol {

struct ProbabilisticAdmitterParams {
  double queue_depth_threshold = 5;      // > 0 (llm-d: an integer)
  double kv_cache_util_threshold = 0.8;  // (0, 1]
  double power = 5.0;                    // > 0
  double k = 300.0;                      // > 0
};

class ProbabilisticAdmitter final : public Admitter {
 public:
  static constexpr std::string_view kType = "probabilistic-admitter";
  // Draws from a Mersenne Twister seeded with `seed`.
  ProbabilisticAdmitter(ProbabilisticAdmitterParams params, std::uint64_t seed);
  // Draws from `uniform` (values in [0, 1)): for tests that need exact draws.
  ProbabilisticAdmitter(ProbabilisticAdmitterParams params, std::function<double()> uniform);

  std::string_view type() const override { return kType; }
  bool admit(int priority, std::span<const EndpointLoad> pool,
             std::span<const std::uint8_t> gone) override;

  // The pool's saturation as defined above; -1 when no endpoint counts.
  double saturation(std::span<const EndpointLoad> pool, std::span<const std::uint8_t> gone) const;
  // The probability of refusing a sheddable request at `saturation`.
  double shed_probability(double saturation) const;
  const ProbabilisticAdmitterParams& params() const { return params_; }

 private:
  double draw();
  ProbabilisticAdmitterParams params_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::function<double()> uniform_;  // empty: rng_
};

}  // namespace sluice::flowcontrol
