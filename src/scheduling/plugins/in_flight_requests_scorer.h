// in-flight-requests-scorer (sluice): prefers the endpoints with the fewest
// requests sluice has in flight on them now, min-max normalized like
// queue-scorer (fewest 1, most 0, all equal 1). Needs no scraped metrics,
// so it works in front of servers without /metrics; a profile of this
// scorer alone is least-in-flight routing with random tie-break.
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class InFlightRequestsScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "in-flight-requests-scorer";
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kInFlight; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
};

}  // namespace sluice::scheduling
