#include "scheduling/plugins/kv_cache_utilization_scorer.h"

namespace sluice::scheduling {

void KvCacheUtilizationScorer::score_columns(CycleState&, const Request&,
                                             std::span<const Endpoint* const>,
                                             const CandidateColumns& columns,
                                             std::span<double> scores) {
  for (std::size_t i = 0; i < columns.size(); ++i) scores[i] = 1.0 - columns.kv_usage[i];
}

}  // namespace sluice::scheduling
