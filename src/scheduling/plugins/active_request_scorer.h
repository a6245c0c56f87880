// active-request-scorer (llm-d): prefers the endpoints with the fewest
// requests in flight, counted by sluice's dispatcher (Endpoint::in_flight,
// what llm-d's inflight-load-producer counts). An endpoint with at most
// idleThreshold (default 0) scores 1; any other (max - count) / max x
// maxBusyScore (default 1), max the highest count among the candidates.
// llm-d: pkg/epp/framework/plugins/scheduling/scorer/activerequest.
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class ActiveRequestScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "active-request-scorer";
  ActiveRequestScorer(std::uint32_t idle_threshold, double max_busy_score)
      : idle_(idle_threshold), max_busy_(max_busy_score) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kInFlight; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;

 private:
  double idle_;
  double max_busy_;
};

}  // namespace sluice::scheduling
