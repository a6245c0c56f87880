#include "scheduling/plugins/in_flight_requests_scorer.h"

#include "scheduling/plugins/queue_scorer.h"

namespace sluice::scheduling {

void InFlightRequestsScorer::score(CycleState&, const Request&,
                                   std::span<const Endpoint* const> candidates,
                                   std::span<double> scores) {
  score_lower_is_better(candidates, scores,
                        [](const Endpoint& e) { return static_cast<double>(e.in_flight); });
}

}  // namespace sluice::scheduling
