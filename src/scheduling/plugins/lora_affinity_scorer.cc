#include "scheduling/plugins/lora_affinity_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void LoraAffinityScorer::score(CycleState&, const Request& request,
                               std::span<const Endpoint* const> candidates,
                               std::span<double> scores) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Metrics& m = candidates[i]->metrics;
    auto has = [&](const std::vector<std::string>& v) {
      return std::find(v.begin(), v.end(), request.model) != v.end();
    };
    const auto loaded = m.active_models.size() + m.waiting_models.size();
    if (has(m.active_models))
      scores[i] = 1.0;
    else if (m.max_active_models > 0 && loaded < static_cast<std::size_t>(m.max_active_models))
      scores[i] = 0.8;
    else if (has(m.waiting_models))
      scores[i] = 0.6;
    else
      scores[i] = 0.0;
  }
}

}  // namespace sluice::scheduling
