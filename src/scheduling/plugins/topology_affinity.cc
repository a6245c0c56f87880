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
  const TopologyExtractor::Values at = extractor_->values(*peer);
  // One pass, reading each candidate's labels only up to minAffinity's
  // level (what lies beyond cannot make it qualify); the verdicts are kept
  // so that none qualifying leaves the list whole (fail open).
  near_.resize(candidates.size());
  bool any = false;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    near_[i] = extractor_->compare(at, *candidates[i], min_affinity_) <= min_affinity_;
    any = any || near_[i];
  }
  if (!any) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (near_[i]) candidates[kept++] = candidates[i];
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
  const TopologyExtractor::Values at = extractor_->values(*peer);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    scores[i] = kLevelScores[static_cast<int>(extractor_->compare(at, *candidates[i]))];
}

}  // namespace sluice::scheduling
