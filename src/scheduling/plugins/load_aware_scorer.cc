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
  // score_of without its branch, over locals (through members the
  // compiler reloads them after every store): an empty queue scores
  // 0.5 x (1 - 0) = 0.5 either way, and a negative one is clamped to it.
  const double t = threshold_;
  const double inv = inv_threshold_;
  const double* waiting = columns.queue.data();
  double* out = scores.data();
  const std::size_t n = columns.size();
  for (std::size_t i = 0; i < n; ++i)
    out[i] = 0.5 * (1.0 - std::min(std::max(waiting[i], 0.0), t) * inv);
}

}  // namespace sluice::scheduling
