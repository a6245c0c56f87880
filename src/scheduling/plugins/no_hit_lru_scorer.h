// no-hit-lru-scorer (llm-d): spreads cold requests — those no candidate
// holds any prefix block of — over the endpoints that have gone longest
// without one, so new prefixes warm different caches. A warm request
// scores 0.5 everywhere (neutral). For a cold one over n > 1 candidates:
// the candidates never given a cold request score 1 - i / (n - 1) in
// candidate order (i = 0, 1, ...); the others 1 - (never + p) / (n - 1),
// at least 0, p their place in the LRU counted from its oldest entry, never
// the number of never-used candidates. One candidate scores 1. After
// dispatch, a cold request's serving endpoints (decode and, in P/D,
// prefill) move to the LRU's newest end.
// llm-d: pkg/epp/framework/plugins/scheduling/scorer/nohitlru.
//
// State: the LRU, endpoint slots oldest first, at most lruSize (default
// 1024) of them; past that the oldest is dropped, and counts as never used
// again (as in llm-d). Dispatcher thread only.
#pragma once

#include "scheduling/plugins/approx_prefix_cache_producer.h"

namespace sluice::scheduling {

class NoHitLruScorer final : public Plugin, public ColumnScorer, public RequestLifecycle {
 public:
  static constexpr std::string_view kType = "no-hit-lru-scorer";
  static constexpr std::int64_t kDefaultLruSize = 1024;
  NoHitLruScorer(ApproxPrefixCacheProducer* producer, std::uint32_t lru_size)
      : producer_(producer), lru_size_(lru_size) {}
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kSlot; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
  void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) override;

  // The LRU, oldest first (tests, debugging).
  const std::vector<std::uint32_t>& lru() const { return order_; }

 private:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;
  bool cold(const PrefixMatch& m, std::span<const std::uint32_t> slots);
  void touch(std::uint32_t slot);
  void reindex();

  ApproxPrefixCacheProducer* producer_;
  std::uint32_t lru_size_;
  std::vector<std::uint32_t> order_;  // slots, least recently used first
  std::vector<std::uint32_t> pos_;    // by slot: place in order_, or kAbsent
  std::vector<std::uint8_t> held_;    // scratch by slot: holds a block
  CycleKey<bool> cold_key_;
};

}  // namespace sluice::scheduling
