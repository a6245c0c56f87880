// prefix-based-pd-decider (llm-d): disaggregate (run a separate prefill)
// when the part of the prompt the chosen decode endpoint does not have
// cached is at least `nonCachedTokens` tokens: prompt tokens (characters /
// 4) minus cached blocks x block size. nonCachedTokens 0 (the default)
// never disaggregates, as llm-d.
#pragma once

#include "scheduling/plugins/approx_prefix_cache_producer.h"

namespace sluice::scheduling {

class PdDecider {
 public:
  virtual ~PdDecider() = default;
  // True: run the prefill profile for `request`, decoded on `decode`.
  virtual bool disaggregate(CycleState& cycle, const Request& request, const Endpoint& decode) = 0;
};

class PrefixBasedPdDecider final : public Plugin, public PdDecider {
 public:
  static constexpr std::string_view kType = "prefix-based-pd-decider";
  PrefixBasedPdDecider(std::uint64_t non_cached_tokens, ApproxPrefixCacheProducer* producer)
      : non_cached_tokens_(non_cached_tokens), producer_(producer) {}
  std::string_view type() const override { return kType; }
  bool disaggregate(CycleState& cycle, const Request& request, const Endpoint& decode) override;

 private:
  std::uint64_t non_cached_tokens_;
  ApproxPrefixCacheProducer* producer_;
};

}  // namespace sluice::scheduling
