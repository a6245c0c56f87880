#include "scheduling/plugins/queue_scorer.h"

#include <algorithm>
#include <limits>

namespace sluice::scheduling {

void score_lower_is_better(std::span<const Endpoint* const> candidates, std::span<double> scores,
                           double (*value)(const Endpoint&)) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const double v = value(*candidates[i]);
    scores[i] = v;  // stash
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double range = hi - lo;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    scores[i] = range > 0 ? (hi - scores[i]) / range : 1.0;
}

void QueueScorer::score(CycleState&, const Request&, std::span<const Endpoint* const> candidates,
                        std::span<double> scores) {
  score_lower_is_better(candidates, scores, [](const Endpoint& e) {
    return e.metrics.waiting_queue_size + static_cast<double>(e.dispatched_since_scrape);
  });
}

}  // namespace sluice::scheduling
