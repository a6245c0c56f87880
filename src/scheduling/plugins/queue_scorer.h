// queue-scorer (GIE): prefers endpoints with fewer waiting requests, scored
// by min-max normalization across the candidates: the shortest queue scores
// 1, the longest 0; all equal scores 1.
//
// sluice counts the requests it dispatched to an endpoint since its last
// scrape as waiting too, so a burst between scrapes does not pile onto the
// endpoint that looked emptiest at the last scrape.
#pragma once

#include <limits>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class QueueScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "queue-scorer";
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kQueue; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
};

// Min-max normalization shared by the load scorers: lower is better; all
// equal -> 1. Over a column: contiguous, no pointer per endpoint.
inline void score_lower_is_better(std::span<const double> values, std::span<double> scores) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const double v : values) {
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  const double range = hi - lo;
  if (!(range > 0)) {
    for (std::size_t i = 0; i < values.size(); ++i) scores[i] = 1.0;
    return;
  }
  const double inv = 1.0 / range;
  for (std::size_t i = 0; i < values.size(); ++i) scores[i] = (hi - values[i]) * inv;
}

}  // namespace sluice::scheduling
