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
  auto near = [&](const Endpoint* e) { return extractor_->compare(at, *e) <= min_affinity_; };
  // None qualifies: fail open (count first, so the list is left whole).
  if (std::none_of(candidates.begin(), candidates.end(), near)) return;
  std::erase_if(candidates, [&](const Endpoint* e) { return !near(e); });
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
