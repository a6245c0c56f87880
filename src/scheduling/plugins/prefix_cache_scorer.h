// prefix-cache-scorer (GIE): prefers the endpoints that most likely hold
// the request's prompt prefix in their KV cache: score = leading blocks
// cached / blocks hashed (0 when the prompt has no full block). The index
// is an approx-prefix-cache-producer's: the one named in `producer`, the
// only one declared, or else one of its own built from the same parameters.
#pragma once

#include "scheduling/plugins/approx_prefix_cache_producer.h"

namespace sluice::scheduling {

class PrefixCacheScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "prefix-cache-scorer";
  explicit PrefixCacheScorer(ApproxPrefixCacheProducer* producer) : producer_(producer) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kSlot; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
  ApproxPrefixCacheProducer* producer() const { return producer_; }

 private:
  ApproxPrefixCacheProducer* producer_;
  std::vector<std::uint32_t> by_slot_;  // scratch
};

}  // namespace sluice::scheduling
