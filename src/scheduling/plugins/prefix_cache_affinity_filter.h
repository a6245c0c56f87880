// prefix-cache-affinity-filter (llm-d): keeps only the cache-warm ("sticky")
// endpoints — prefix match ratio (matched / hashed blocks) at least
// affinityThreshold — unless none is, or they have fallen too far behind:
//   - TTFT gate (maxTTFTPenaltyMs > 0): an endpoint's TTFT is estimated as
//     tokens in flight / peakPrefillThroughput x 1000 ms; when the best
//     sticky endpoint's exceeds the best other one's by more than
//     maxTTFTPenaltyMs, every candidate is kept;
//   - token gate (maxTokensInFlightPenalty > 0, llm-d's earlier gate the
//     optimized-baseline guide still sets): the same on tokens in flight.
// With explorationProbability the gate is skipped at random (every
// candidate kept); one candidate, or affinityThreshold 0, keeps all.
// Tokens in flight are an inflight-load-producer's; matches an
// approx-prefix-cache-producer's.
// llm-d: pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity.
#pragma once

#include <random>

#include "scheduling/plugins/inflight_load_producer.h"

namespace sluice::scheduling {

struct AffinityParams {
  double affinity_threshold = 0.80;
  double exploration_probability = 0;
  double max_ttft_penalty_ms = 18000;
  double peak_prefill_throughput = 15928;  // tokens/s
  std::uint64_t max_tokens_in_flight_penalty = 0;
};

class PrefixCacheAffinityFilter final : public Plugin, public Filter {
 public:
  static constexpr std::string_view kType = "prefix-cache-affinity-filter";
  PrefixCacheAffinityFilter(AffinityParams p, ApproxPrefixCacheProducer* prefix,
                            InFlightLoadProducer* load, std::uint64_t seed)
      : p_(p), prefix_(prefix), load_(load), rng_(seed) {}
  std::string_view type() const override { return kType; }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;

 private:
  // True when the gates let the sticky set stand.
  bool stays_sticky(double best_sticky_tokens, double best_other_tokens) const;

  AffinityParams p_;
  ApproxPrefixCacheProducer* prefix_;
  InFlightLoadProducer* load_;  // null when neither gate is on
  std::mt19937_64 rng_;
  std::vector<std::uint8_t> by_slot_;     // scratch: 1 for a sticky slot, else 0
  std::vector<std::uint32_t> sticky_at_;  // scratch: the sticky candidates' positions
};

}  // namespace sluice::scheduling
