#include "scheduling/plugins/prefix_cache_affinity_filter.h"

#include <algorithm>
#include <limits>

namespace sluice::scheduling {

bool PrefixCacheAffinityFilter::stays_sticky(double best_sticky, double best_other) const {
  const double gap = best_sticky - best_other;
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
  // Which slots are sticky, decided once for the few that hold a block
  // (llm-d's ratio, matched / hashed >= threshold), not per candidate.
  const double total = static_cast<double>(m.total_blocks);
  for (const auto& [slot, blocks] : m.matched) {
    if (slot >= by_slot_.size()) by_slot_.resize(slot + 1, 0);
    by_slot_[slot] = total > 0 && static_cast<double>(blocks) / total >= p_.affinity_threshold;
  }
  // One pass over the candidates: the least tokens in flight among the
  // sticky ones and among the others, and where the sticky ones are (few:
  // the narrowing below then moves those, reading no record again).
  const std::span<const double> held = load_ ? load_->held() : std::span<const double>();
  const std::uint8_t* sticky = by_slot_.data();
  const std::size_t ns = by_slot_.size();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // In registers, each side's minimum chosen by select: through an array
  // indexed by the verdict, each step waited on the store before it.
  double best_sticky = kNone, best_other = kNone;
  const std::size_t n = candidates.size();
  const Endpoint* const* cand = candidates.data();
  sticky_at_.resize(n);
  std::uint32_t* at = sticky_at_.data();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t slot = cand[i]->index;
    const bool st = slot < ns && sticky[slot];
    const double t = slot < held.size() ? held[slot] : 0.0;
    at[kept] = static_cast<std::uint32_t>(i);  // kept only if sticky: no branch
    kept += st;
    const double as_sticky = st ? t : kNone;
    const double as_other = st ? kNone : t;
    best_sticky = as_sticky < best_sticky ? as_sticky : best_sticky;
    best_other = as_other < best_other ? as_other : best_other;
  }
  // No sticky endpoint keeps all; so do the gates, with others to go to.
  const bool narrow =
      best_sticky != kNone && (best_other == kNone || stays_sticky(best_sticky, best_other));
  if (narrow) {
    for (std::size_t j = 0; j < kept; ++j) candidates[j] = candidates[at[j]];  // at[j] >= j
    candidates.resize(kept);
  }
  for (const auto& [slot, blocks] : m.matched) by_slot_[slot] = 0;
}

}  // namespace sluice::scheduling
