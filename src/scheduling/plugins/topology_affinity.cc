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
  // One pass over the candidates' topology numbers, up to minAffinity's
  // level (what lies beyond cannot make it qualify), noting where the
  // qualifying ones are; none qualifying leaves the list whole (fail open).
  // Locals, not members: the loop may call out (a row derived anew), and
  // through members the compiler reloads them after every such call.
  const std::size_t n = candidates.size();
  near_.resize(n);
  std::uint32_t* pos = near_.data();
  const Endpoint* const* cand = candidates.data();
  const TopologyExtractor* x = extractor_;
  const TopologyLevel loosest = min_affinity_;
  const TopologyExtractor::IdsPass ids = x->ids_pass();
  std::size_t kept = 0;
  std::size_t i = 0;
  // Every candidate is one of the view's: a loop without a call in it
  // (the compiler then keeps its values in registers), and the rest, if
  // any, the slow way.
  for (; i < n; ++i) {
    const TopologyExtractor::Ids* c = ids.find(cand[i]);
    if (!c) [[unlikely]]
      break;
    pos[kept] = static_cast<std::uint32_t>(i);  // kept only if near: no branch
    kept += TopologyExtractor::near(at, *c, loosest);
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
  const TopologyExtractor::IdsPass ids = x->ids_pass();
  const std::size_t n = candidates.size();
  double* out = scores.data();
  std::size_t i = 0;
  for (; i < n; ++i) {  // as the filter's: no call in the loop
    const TopologyExtractor::Ids* c = ids.find(candidates[i]);
    if (!c) [[unlikely]]
      break;
    out[i] = kLevelScores[static_cast<int>(TopologyExtractor::compare(at, *c))];
  }
  for (; i < n; ++i)
    out[i] = kLevelScores[static_cast<int>(TopologyExtractor::compare(at, x->ids(*candidates[i])))];
}

}  // namespace sluice::scheduling
