#include "scheduling/plugins/load_aware_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

double LoadAwareScorer::score_of(double waiting) const {
  if (waiting <= 0) return 0.5;
  return 0.5 * (1.0 - std::min(waiting, threshold_) * inv_threshold_);
}

void LoadAwareScorer::score(CycleState&, const Request&,
                            std::span<const Endpoint* const> candidates, std::span<double> scores) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Endpoint& e = *candidates[i];
    double waiting = e.metrics.waiting_queue_size;
    if (count_dispatched_) waiting += static_cast<double>(e.dispatched_since_scrape);
    scores[i] = score_of(waiting);
  }
}

void LoadAwareScorer::score_columns(CycleState& cycle, const Request& request,
                                    std::span<const Endpoint* const> candidates,
                                    const CandidateColumns& columns, std::span<double> scores) {
  if (!count_dispatched_) return score(cycle, request, candidates, scores);
  for (std::size_t i = 0; i < columns.size(); ++i) scores[i] = score_of(columns.queue[i]);
}

}  // namespace sluice::scheduling
