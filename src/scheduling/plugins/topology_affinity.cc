#include "scheduling/plugins/topology_affinity.h"

#include <algorithm>

namespace sluice::scheduling {

namespace {
// The peer endpoint, if it has a topology.
const Endpoint* peer_with_topology(const CycleState& cycle, const TopologyExtractor* x) {
  if (!x) return nullptr;
  const Endpoint* const* peer = cycle.get(kPeerEndpointKey);
  if (!peer || !*peer || !x->has_topology(**peer)) return nullptr;
  return *peer;
}
}  // namespace

void TopologyAffinityFilter::filter(CycleState& cycle, const Request&,
                                    std::vector<const Endpoint*>& candidates) {
  const Endpoint* peer = peer_with_topology(cycle, extractor_);
  if (!peer) return;
  extractor_->begin_pass();
  const TopologyExtractor::Ids at = extractor_->ids(*peer);
  // The peer's groups up to minAffinity's level are marked (what lies
  // beyond cannot make a candidate qualify), then one pass notes where the
  // marked candidates are; none qualifying leaves the list whole (fail
  // open). Alone (no view), each candidate's numbers are compared.
  const std::size_t n = candidates.size();
  near_.resize(n);
  std::uint32_t* pos = near_.data();
  const Endpoint* const* cand = candidates.data();
  const TopologyExtractor* x = extractor_;
  const TopologyLevel loosest = min_affinity_;
  std::size_t kept = 0;
  std::size_t i = 0;
  if (x->mark(at, loosest)) {
    const PoolView& view = *x->view();
    for (; i < n; ++i) {  // a candidate outside the view ends it: the rest below
      const std::size_t p = view.position(cand[i]);
      if (p == view.size) [[unlikely]]
        break;
      pos[kept] = static_cast<std::uint32_t>(i);  // kept only if near: no branch
      kept += x->marked(p) != TopologyLevel::kNone;
    }
  }
  for (; i < n; ++i) {
    pos[kept] = static_cast<std::uint32_t>(i);
    kept += TopologyExtractor::near(at, x->ids(*cand[i]), loosest);
  }
  if (kept == 0) return;
  for (std::size_t j = 0; j < kept; ++j) candidates[j] = candidates[pos[j]];  // pos[j] >= j
  candidates.resize(kept);
}

void TopologyAffinityScorer::score(CycleState& cycle, const Request&,
                                   std::span<const Endpoint* const> candidates,
                                   std::span<double> scores) {
  const Endpoint* peer = peer_with_topology(cycle, extractor_);
  if (!peer) {
    std::fill(scores.begin(), scores.begin() + candidates.size(), 0.0);
    return;
  }
  extractor_->begin_pass();
  const TopologyExtractor::Ids at = extractor_->ids(*peer);
  const TopologyExtractor* x = extractor_;  // a local: see the filter
  const std::size_t n = candidates.size();
  double* out = scores.data();
  std::size_t i = 0;
  // As the filter's, host to zone; the region (most often the whole
  // pool) is compared, not marked.
  if (x->mark(at, TopologyLevel::kZone)) {
    const PoolView& view = *x->view();
    const std::uint32_t region = at[3];
    for (; i < n; ++i) {
      const std::size_t p = view.position(candidates[i]);
      if (p == view.size) [[unlikely]]
        break;
      const TopologyLevel m = x->marked(p);
      const bool same_region = region != 0 && x->region_at(p) == region;
      const TopologyLevel level = m != TopologyLevel::kNone ? m
                                  : same_region             ? TopologyLevel::kRegion
                                                            : TopologyLevel::kNone;
      out[i] = kLevelScores[static_cast<int>(level)];
    }
  }
  for (; i < n; ++i)
    out[i] = kLevelScores[static_cast<int>(TopologyExtractor::compare(at, x->ids(*candidates[i])))];
}

}  // namespace sluice::scheduling
