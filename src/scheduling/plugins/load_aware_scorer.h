// load-aware-scorer (llm-d): scores the waiting queue the endpoint reported
// in its last scrape on [0, 0.5]: an empty queue 0.5, else
// 0.5 x (1 - min(waiting, threshold) / threshold), threshold default 128.
// llm-d: pkg/epp/framework/plugins/scheduling/scorer/loadaware.
// countDispatchedSinceScrape (sluice, default false): count the requests
// sluice sent since that scrape as waiting too, as queue-scorer does, so a
// burst between two scrapes does not all go to one endpoint.
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class LoadAwareScorer final : public Plugin, public Scorer {
 public:
  static constexpr std::string_view kType = "load-aware-scorer";
  static constexpr std::int64_t kDefaultThreshold = 128;
  LoadAwareScorer(double threshold, bool count_dispatched)
      : threshold_(threshold),
        inv_threshold_(1.0 / threshold),
        count_dispatched_(count_dispatched) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override {
    return count_dispatched_ ? CandidateColumns::kQueue : 0u;
  }
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) override;
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;

 private:
  double score_of(double waiting) const;
  double threshold_;
  double inv_threshold_;  // a multiplication per endpoint, not a division
  bool count_dispatched_;
};

}  // namespace sluice::scheduling
