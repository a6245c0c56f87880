#include "scheduling/plugins/active_request_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void ActiveRequestScorer::score_columns(CycleState&, const Request&,
                                        std::span<const Endpoint* const>,
                                        const CandidateColumns& columns, std::span<double> scores) {
  // Locals, not members or vectors: through them the compiler reloads
  // every one after each store into `scores`.
  const std::size_t n = columns.size();
  const double* in_flight = columns.in_flight.data();
  double* out = scores.data();
  const double idle = idle_;
  double max = 0;
  for (std::size_t i = 0; i < n; ++i) max = in_flight[i] > max ? in_flight[i] : max;
  // max > idle_ >= 0 whenever a count is above idle_ (k is then finite); a
  // multiplication per endpoint, not a division (512 of them a cycle).
  const double k = max > 0 ? max_busy_ / max : 0;
  for (std::size_t i = 0; i < n; ++i) {
    // Both arms computed, then selected: a branch-free loop the compiler
    // vectorizes (with a branch per endpoint it does not).
    const double c = in_flight[i];
    const double busy = (max - c) * k;
    out[i] = c <= idle ? 1.0 : busy;
  }
}

}  // namespace sluice::scheduling
