#include "scheduling/plugins/weighted_random_picker.h"

#include <algorithm>
#include <cmath>

namespace sluice::scheduling {

void WeightedRandomPicker::pick(CycleState&, const Request&, std::span<ScoredEndpoint> scored,
                                std::vector<const Endpoint*>& targets) {
  if (scored.empty()) return;
  bool any_positive = false;
  for (const auto& s : scored) any_positive = any_positive || s.score > 0;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // Replace each score by its A-Res key (log form: log(u) / w), then keep
  // the k largest. Zero weights get -inf unless all are zero.
  for (auto& s : scored) {
    double r = u(rng_);
    if (r <= 0) r = 1e-300;
    if (!any_positive)
      s.score = r;
    else
      s.score = s.score > 0 ? std::log(r) / s.score : -INFINITY;
  }
  const std::size_t k = std::min<std::size_t>(std::max<std::uint32_t>(max_, 1), scored.size());
  std::partial_sort(
      scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
      [](const ScoredEndpoint& a, const ScoredEndpoint& b) { return a.score > b.score; });
  for (std::size_t i = 0; i < k; ++i) {
    if (any_positive && scored[i].score == -INFINITY) break;
    targets.push_back(scored[i].endpoint);
  }
}

}  // namespace sluice::scheduling
