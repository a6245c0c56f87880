#include "scheduling/plugins/kv_cache_utilization_scorer.h"

namespace sluice::scheduling {

void KvCacheUtilizationScorer::score(CycleState&, const Request&,
                                     std::span<const Endpoint* const> candidates,
                                     std::span<double> scores) {
  for (std::size_t i = 0; i < candidates.size(); ++i)
    scores[i] = 1.0 - candidates[i]->metrics.kv_cache_usage;
}

}  // namespace sluice::scheduling
