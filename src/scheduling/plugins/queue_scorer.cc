#include "scheduling/plugins/queue_scorer.h"

#include <algorithm>
#include <limits>

namespace sluice::scheduling {

void QueueScorer::score_columns(CycleState&, const Request&, std::span<const Endpoint* const>,
                                const CandidateColumns& columns, std::span<double> scores) {
  score_lower_is_better(columns.queue, scores);
}

}  // namespace sluice::scheduling
