#include "scheduling/plugins/no_hit_lru_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

bool NoHitLruScorer::cold(const PrefixMatch& m, std::span<const std::uint32_t> slots) {
  // Mark the few endpoints holding a block, then look for one among the
  // candidates (stopping at the first): one pass over the candidates at
  // most, none for a request nobody holds.
  bool held = false;
  for (const auto& [slot, blocks] : m.matched) {
    if (blocks == 0) continue;
    if (slot >= held_.size()) held_.resize(slot + 1, 0);
    held_[slot] = 1;
    held = true;
  }
  bool hit = false;
  if (held)
    for (std::uint32_t s : slots)
      if (s < held_.size() && held_[s]) {
        hit = true;
        break;
      }
  for (const auto& [slot, blocks] : m.matched)
    if (slot < held_.size()) held_[slot] = 0;
  return !hit;
}

void NoHitLruScorer::score_columns(CycleState& cycle, const Request& request,
                                   std::span<const Endpoint* const>,
                                   const CandidateColumns& columns, std::span<double> scores) {
  const std::size_t n = columns.size();
  const bool is_cold = cold(producer_->match(cycle, request), columns.slot);
  cycle.put(cold_key_, is_cold);
  if (!is_cold) {
    std::fill(scores.begin(), scores.begin() + n, 0.5);
    return;
  }
  if (n == 1) {
    scores[0] = 1.0;
    return;
  }
  std::size_t never = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t s = columns.slot[i];
    never += s >= pos_.size() || pos_[s] == kAbsent;
  }
  const double inv = 1.0 / static_cast<double>(n - 1);
  std::size_t next_never = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t s = columns.slot[i];
    const bool used = s < pos_.size() && pos_[s] != kAbsent;
    const std::size_t rank = used ? never + pos_[s] : next_never++;
    scores[i] = std::max(0.0, 1.0 - static_cast<double>(rank) * inv);
  }
}

void NoHitLruScorer::reindex() {
  std::fill(pos_.begin(), pos_.end(), kAbsent);
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const std::uint32_t s = order_[i];
    if (s >= pos_.size()) pos_.resize(s + 1, kAbsent);
    pos_[s] = static_cast<std::uint32_t>(i);
  }
}

void NoHitLruScorer::touch(std::uint32_t slot) {
  auto it = std::find(order_.begin(), order_.end(), slot);
  if (it != order_.end()) order_.erase(it);
  order_.push_back(slot);
  if (order_.size() > lru_size_) order_.erase(order_.begin());
}

void NoHitLruScorer::pre_request(CycleState& cycle, const Request&, SchedulingResult& result) {
  const bool* is_cold = cycle.get(cold_key_);
  if (!is_cold || !*is_cold) return;
  for (const Endpoint* e : result.serving) touch(e->index);
  reindex();
}

}  // namespace sluice::scheduling
