#include "scheduling/plugins/active_request_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void ActiveRequestScorer::score_columns(CycleState&, const Request&,
                                        std::span<const Endpoint* const>,
                                        const CandidateColumns& columns, std::span<double> scores) {
  double max = 0;
  for (double c : columns.in_flight) max = std::max(max, c);
  // max > idle_ >= 0 whenever a count is above idle_: no division by 0.
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const double c = columns.in_flight[i];
    scores[i] = c <= idle_ ? 1.0 : (max - c) / max * max_busy_;
  }
}

}  // namespace sluice::scheduling
