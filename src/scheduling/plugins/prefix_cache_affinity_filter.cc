#include "scheduling/plugins/prefix_cache_affinity_filter.h"

#include <algorithm>
#include <limits>

namespace sluice::scheduling {

bool PrefixCacheAffinityFilter::sticky(std::uint32_t slot, double total) const {
  const double matched = slot < by_slot_.size() ? by_slot_[slot] : 0;
  return total > 0 && matched / total >= p_.affinity_threshold;
}

bool PrefixCacheAffinityFilter::stays_sticky(std::uint64_t best_sticky,
                                             std::uint64_t best_other) const {
  const double gap = static_cast<double>(best_sticky) - static_cast<double>(best_other);
  if (p_.max_ttft_penalty_ms > 0 &&
      gap / p_.peak_prefill_throughput * 1000 > p_.max_ttft_penalty_ms)
    return false;
  if (p_.max_tokens_in_flight_penalty > 0 &&
      gap > static_cast<double>(p_.max_tokens_in_flight_penalty))
    return false;
  return true;
}

void PrefixCacheAffinityFilter::filter(CycleState& cycle, const Request& request,
                                       std::vector<const Endpoint*>& candidates) {
  if (candidates.size() <= 1 || p_.affinity_threshold <= 0) return;
  if (p_.exploration_probability > 0 &&
      std::uniform_real_distribution<double>(0, 1)(rng_) < p_.exploration_probability)
    return;
  const PrefixMatch& m = prefix_->match(cycle, request);
  if (m.matched.empty()) return;  // nothing warm: no sticky endpoint
  for (const auto& [slot, blocks] : m.matched) {
    if (slot >= by_slot_.size()) by_slot_.resize(slot + 1, 0);
    by_slot_[slot] = blocks;
  }
  const double total = static_cast<double>(m.total_blocks);
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t best_sticky = kNone, best_other = kNone;
  // One pass over the candidates' records; the verdicts are kept for the
  // narrowing below, which then reads no record again.
  is_sticky_.resize(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::uint32_t slot = candidates[i]->index;
    const std::uint64_t t = load_ ? load_->tokens_in_flight(slot) : 0;
    is_sticky_[i] = sticky(slot, total);
    std::uint64_t& best = is_sticky_[i] ? best_sticky : best_other;
    best = std::min(best, t);
  }
  // No sticky endpoint keeps all; so do the gates, with others to go to.
  const bool narrow =
      best_sticky != kNone && (best_other == kNone || stays_sticky(best_sticky, best_other));
  if (narrow) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (is_sticky_[i]) candidates[kept++] = candidates[i];
    candidates.resize(kept);
  }
  for (const auto& [slot, blocks] : m.matched) by_slot_[slot] = 0;
}

}  // namespace sluice::scheduling
