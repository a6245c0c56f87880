// token-load-scorer (llm-d): prefers the endpoints with the fewest tokens
// of prefill work: an endpoint's tokens in flight plus the tokens this
// request would add there (its prompt the endpoint has not cached), both
// from an inflight-load-producer. score = 1 - min(load, T) / T with T =
// queueThresholdTokens (default 4194304: 128 requests of 32K); a load of 0
// scores 1. llm-d: pkg/epp/framework/plugins/scheduling/scorer/tokenload.
#pragma once

#include "scheduling/plugins/inflight_load_producer.h"

namespace sluice::scheduling {

class TokenLoadScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "token-load-scorer";
  static constexpr std::int64_t kDefaultThreshold = 4194304;
  TokenLoadScorer(InFlightLoadProducer* producer, double threshold_tokens)
      : producer_(producer), threshold_(threshold_tokens) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kSlot; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;

 private:
  InFlightLoadProducer* producer_;
  double threshold_;
};

}  // namespace sluice::scheduling
