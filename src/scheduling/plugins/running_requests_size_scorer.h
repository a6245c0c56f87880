// running-requests-size-scorer: prefers endpoints with fewer requests in
// their running batch, min-max normalized across the candidates like
// queue-scorer (fewest 1, most 0, all equal 1).
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class RunningRequestsSizeScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "running-requests-size-scorer";
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kRunning; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
};

}  // namespace sluice::scheduling
