#include "scheduling/plugins/in_flight_requests_scorer.h"

#include "scheduling/plugins/queue_scorer.h"

namespace sluice::scheduling {

void InFlightRequestsScorer::score_columns(CycleState&, const Request&,
                                           std::span<const Endpoint* const>,
                                           const CandidateColumns& columns,
                                           std::span<double> scores) {
  score_lower_is_better(columns.in_flight, scores);
}

}  // namespace sluice::scheduling
