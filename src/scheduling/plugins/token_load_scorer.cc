#include "scheduling/plugins/token_load_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void TokenLoadScorer::score_columns(CycleState& cycle, const Request& request,
                                    std::span<const Endpoint* const>,
                                    const CandidateColumns& columns, std::span<double> scores) {
  producer_->token_load(cycle, request, columns.slot, scores);
  const double inv = 1.0 / threshold_;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const double load = scores[i];
    scores[i] = load <= 0 ? 1.0 : 1.0 - std::min(load, threshold_) * inv;
  }
}

}  // namespace sluice::scheduling
