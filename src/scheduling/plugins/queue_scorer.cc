#include "scheduling/plugins/queue_scorer.h"

#include <algorithm>
#include <limits>

namespace sluice::scheduling {

void QueueScorer::score(CycleState&, const Request&, std::span<const Endpoint* const> candidates,
                        std::span<double> scores) {
  score_lower_is_better(candidates, scores, [](const Endpoint& e) {
    return e.metrics.waiting_queue_size + static_cast<double>(e.dispatched_since_scrape);
  });
}

}  // namespace sluice::scheduling
