// weighted-random-picker (GIE): maxNumOfEndpoints (default 1) endpoints
// drawn without replacement with probability proportional to their score
// (A-Res weighted reservoir sampling: key = u^(1/score), highest keys win).
// Endpoints scored 0 are drawn only when every candidate scores 0, then
// uniformly.
#pragma once

#include <random>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class WeightedRandomPicker final : public Plugin, public Picker {
 public:
  static constexpr std::string_view kType = "weighted-random-picker";
  WeightedRandomPicker(std::uint32_t max_endpoints, std::uint64_t seed)
      : max_(max_endpoints), rng_(seed) {}
  std::string_view type() const override { return kType; }
  void pick(CycleState& cycle, const Request& request, std::span<ScoredEndpoint> scored,
            std::vector<const Endpoint*>& targets) override;

 private:
  std::uint32_t max_;
  std::mt19937_64 rng_;
};

}  // namespace sluice::scheduling
