#include "scheduling/plugins/prefix_cache_scorer.h"

namespace sluice::scheduling {

void PrefixCacheScorer::score(CycleState& cycle, const Request& request,
                              std::span<const Endpoint* const> candidates,
                              std::span<double> scores) {
  PrefixMatch* m = cycle.get(producer_->match_key());
  if (!m) {
    m = &cycle.put(producer_->match_key());
    producer_->index().match(request.prefix_hashes, *m);
  }
  const double total = static_cast<double>(m->total_blocks);
  // Dense by slot for the lookup, then cleared: O(candidates + matches).
  for (const auto& [slot, blocks] : m->matched) {
    if (slot >= by_slot_.size()) by_slot_.resize(slot + 1, 0);
    by_slot_[slot] = blocks;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::uint32_t slot = candidates[i]->index;
    const std::uint32_t blocks = slot < by_slot_.size() ? by_slot_[slot] : 0;
    scores[i] = total > 0 ? blocks / total : 0.0;
  }
  for (const auto& [slot, blocks] : m->matched) by_slot_[slot] = 0;
}

}  // namespace sluice::scheduling
