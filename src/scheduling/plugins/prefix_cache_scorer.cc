#include "scheduling/plugins/prefix_cache_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void PrefixCacheScorer::score_columns(CycleState& cycle, const Request& request,
                                      std::span<const Endpoint* const>,
                                      const CandidateColumns& columns, std::span<double> scores) {
  PrefixMatch* m = cycle.get(producer_->match_key());
  if (!m) {
    m = &cycle.put(producer_->match_key());
    producer_->index().match(request.prefix_hashes, *m);
  }
  // A multiplication per endpoint, not a division (a division's latency
  // per endpoint was most of this scorer).
  const double per_block = m->total_blocks > 0 ? 1.0 / static_cast<double>(m->total_blocks) : 0.0;
  // Dense by slot for the lookup, then cleared: O(candidates + matches).
  for (const auto& [slot, blocks] : m->matched) {
    if (slot >= by_slot_.size()) by_slot_.resize(slot + 1, 0);
    by_slot_[slot] = blocks;
  }
  if (length_weight_ > 0 && m->total_blocks > 0) {
    // llm-d's blend; the block size is the request's (the producer's).
    const double tokens_per_block =
        static_cast<double>(request.block_size_tokens) / static_cast<double>(scale_tokens_);
    const double w = length_weight_;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const std::uint32_t slot = columns.slot[i];
      const std::uint32_t blocks = slot < by_slot_.size() ? by_slot_[slot] : 0;
      const double length = std::min(1.0, blocks * tokens_per_block);
      scores[i] = w * length * length + (1 - w) * (blocks * per_block);
    }
  } else {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const std::uint32_t slot = columns.slot[i];
      const std::uint32_t blocks = slot < by_slot_.size() ? by_slot_[slot] : 0;
      scores[i] = blocks * per_block;
    }
  }
  for (const auto& [slot, blocks] : m->matched) by_slot_[slot] = 0;
}

}  // namespace sluice::scheduling
