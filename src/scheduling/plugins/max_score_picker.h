// max-score-picker (GIE): the endpoints with the highest score, best first,
// at most maxNumOfEndpoints (default 1; the rest are fallbacks). Ties are
// broken at random, so equal endpoints share the load.
#pragma once

#include <random>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class MaxScorePicker final : public Plugin, public Picker {
 public:
  static constexpr std::string_view kType = "max-score-picker";
  MaxScorePicker(std::uint32_t max_endpoints, std::uint64_t seed)
      : max_(max_endpoints), rng_(seed) {}
  std::string_view type() const override { return kType; }
  void pick(CycleState& cycle, const Request& request, std::span<ScoredEndpoint> scored,
            std::vector<const Endpoint*>& targets) override;
  // One target: a single pass that only reads. More: shuffled and sorted.
  bool reorders_scored() const override { return max_ > 1; }

 private:
  std::uint32_t max_;
  std::mt19937_64 rng_;
};

}  // namespace sluice::scheduling
