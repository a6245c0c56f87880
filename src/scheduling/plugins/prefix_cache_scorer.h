// prefix-cache-scorer (GIE): prefers the endpoints that most likely hold
// the request's prompt prefix in their KV cache: score = leading blocks
// cached / blocks hashed (0 when the prompt has no full block). With
// llm-d's matchLengthWeight w > 0 the score also rewards a long match:
//   w * min(1, matched tokens / matchLengthScaleTokens)^2 + (1 - w) * ratio
// (llm-d pkg/epp/framework/plugins/scheduling/scorer/prefix). The index
// is an approx-prefix-cache-producer's: the one named in `producer`, the
// only one declared, or else one of its own built from the same parameters.
#pragma once

#include "scheduling/plugins/approx_prefix_cache_producer.h"

namespace sluice::scheduling {

class PrefixCacheScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "prefix-cache-scorer";
  explicit PrefixCacheScorer(ApproxPrefixCacheProducer* producer, double match_length_weight = 0,
                             std::uint32_t match_length_scale_tokens = 8192)
      : producer_(producer),
        length_weight_(match_length_weight),
        scale_tokens_(match_length_scale_tokens) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kSlot; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
  ApproxPrefixCacheProducer* producer() const { return producer_; }

 private:
  ApproxPrefixCacheProducer* producer_;
  double length_weight_;                // matchLengthWeight, in [0, 1]
  std::uint32_t scale_tokens_;          // matchLengthScaleTokens, > 0
  std::vector<std::uint32_t> by_slot_;  // scratch
};

}  // namespace sluice::scheduling
