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
  auto near = [&](const Endpoint* e) { return extractor_->compare(*peer, *e) <= min_affinity_; };
  // None qualifies: fail open (count first, so the list is left whole).
  if (std::none_of(candidates.begin(), candidates.end(), near)) return;
  std::erase_if(candidates, [&](const Endpoint* e) { return !near(e); });
}

void TopologyAffinityScorer::score(CycleState& cycle, const Request&,
                                   std::span<const Endpoint* const> candidates,
                                   std::span<double> scores) {
  const Endpoint* peer = peer_with_topology(cycle, extractor_);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    scores[i] =
        peer ? kLevelScores[static_cast<int>(extractor_->compare(*peer, *candidates[i]))] : 0.0;
}

}  // namespace sluice::scheduling
