#include "scheduling/plugins/running_requests_size_scorer.h"

#include "scheduling/plugins/queue_scorer.h"

namespace sluice::scheduling {

void RunningRequestsSizeScorer::score(CycleState&, const Request&,
                                      std::span<const Endpoint* const> candidates,
                                      std::span<double> scores) {
  score_lower_is_better(candidates, scores,
                        [](const Endpoint& e) { return e.metrics.running_requests_size; });
}

}  // namespace sluice::scheduling
