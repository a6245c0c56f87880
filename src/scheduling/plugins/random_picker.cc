#include "scheduling/plugins/random_picker.h"

#include <algorithm>

namespace sluice::scheduling {

void RandomPicker::pick(CycleState&, const Request&, std::span<ScoredEndpoint> scored,
                        std::vector<const Endpoint*>& targets) {
  const std::size_t k = std::min<std::size_t>(std::max<std::uint32_t>(max_, 1), scored.size());
  // Partial Fisher-Yates: the first k are a uniform random sample.
  for (std::size_t i = 0; i < k; ++i) {
    std::size_t j = std::uniform_int_distribution<std::size_t>(i, scored.size() - 1)(rng_);
    std::swap(scored[i], scored[j]);
    targets.push_back(scored[i].endpoint);
  }
}

}  // namespace sluice::scheduling
