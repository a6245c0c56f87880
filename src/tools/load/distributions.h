// Random distributions for sluice-load: token counts and inter-arrival
// times. Each flow draws from its own seeded generator, so a scenario with
// a seed replays the same request sequence.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace sluice::load {

using Rng = std::mt19937_64;

struct Distribution {
  enum class Kind { kConstant, kUniform, kNormal, kLogNormal, kExponential };
  Kind kind = Kind::kConstant;
  double a =
      0;  // constant: value; uniform: min; normal: mean; lognormal: median; exponential: mean
  double b = 0;    // uniform: max; normal: stddev; lognormal: sigma (of the log)
  double min = 0;  // samples are clamped to [min, max]
  double max = 1e18;

  double sample(Rng& rng) const;
  // A whole number >= 1 (token counts).
  std::uint64_t sample_count(Rng& rng) const;
  double mean() const;  // of the unclamped distribution
  std::string describe() const;
};

}  // namespace sluice::load
