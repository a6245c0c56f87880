#include "scheduling/plugins/running_requests_size_scorer.h"

#include "scheduling/plugins/queue_scorer.h"

namespace sluice::scheduling {

void RunningRequestsSizeScorer::score_columns(CycleState&, const Request&,
                                              std::span<const Endpoint* const>,
                                              const CandidateColumns& columns,
                                              std::span<double> scores) {
  score_lower_is_better(columns.running, scores);
}

}  // namespace sluice::scheduling
