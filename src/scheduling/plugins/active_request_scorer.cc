#include "scheduling/plugins/active_request_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void ActiveRequestScorer::score_columns(CycleState&, const Request&,
                                        std::span<const Endpoint* const>,
                                        const CandidateColumns& columns, std::span<double> scores) {
  const std::size_t n = columns.size();
  double max = 0;
  for (std::size_t i = 0; i < n; ++i) max = std::max(max, columns.in_flight[i]);
  // max > idle_ >= 0 whenever a count is above idle_ (k is then finite); a
  // multiplication per endpoint, not a division (512 of them a cycle).
  const double k = max > 0 ? max_busy_ / max : 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double c = columns.in_flight[i];
    scores[i] = c <= idle_ ? 1.0 : (max - c) * k;
  }
}

}  // namespace sluice::scheduling
