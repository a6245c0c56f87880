#include "scheduling/plugins/max_score_picker.h"

#include <algorithm>

namespace sluice::scheduling {

void MaxScorePicker::pick(CycleState&, const Request&, std::span<ScoredEndpoint> scored,
                          std::vector<const Endpoint*>& targets) {
  if (scored.empty()) return;
  if (max_ <= 1) {
    // One pass: the best, a uniformly random one among equals (reservoir).
    std::size_t best = 0, ties = 1;
    for (std::size_t i = 1; i < scored.size(); ++i) {
      if (scored[i].score > scored[best].score) {
        best = i;
        ties = 1;
      } else if (scored[i].score == scored[best].score) {
        ++ties;
        if (std::uniform_int_distribution<std::size_t>(0, ties - 1)(rng_) == 0) best = i;
      }
    }
    targets.push_back(scored[best].endpoint);
    return;
  }
  std::shuffle(scored.begin(), scored.end(), rng_);
  const std::size_t k = std::min<std::size_t>(max_, scored.size());
  std::partial_sort(
      scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
      [](const ScoredEndpoint& a, const ScoredEndpoint& b) { return a.score > b.score; });
  for (std::size_t i = 0; i < k; ++i) targets.push_back(scored[i].endpoint);
}

}  // namespace sluice::scheduling
