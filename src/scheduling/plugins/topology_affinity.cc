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
  const bool marked = x->mark(at, loosest);
  if (marked) {
    // Locals: through the extractor the compiler reloads them per candidate.
    const std::uint8_t* marks = x->marks();
    const auto base = reinterpret_cast<std::uintptr_t>(x->view()->base);
    const std::size_t bytes = x->view()->size * sizeof(Endpoint);
    for (; i < n; ++i) {  // a candidate outside the view ends it: the rest below
      const std::uintptr_t d = reinterpret_cast<std::uintptr_t>(cand[i]) - base;
      if (d >= bytes) [[unlikely]]
        break;
      pos[kept] = static_cast<std::uint32_t>(i);  // kept only if near: no branch
      kept += marks[d / sizeof(Endpoint)] != 0;
    }
  }
  for (; i < n; ++i) {
    pos[kept] = static_cast<std::uint32_t>(i);
    kept += TopologyExtractor::near(at, x->ids(*cand[i]), loosest);
  }
  if (marked) x->unmark(at, loosest);
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
  // One code by position (the extractor's): the endpoint's (zone, region)
  // class, or the peer's rack or host, whose members (8 + 32 at 512) are
  // coded for this pass; a table of this pass's score by code. The zone
  // and the region (large groups, the region most often the whole pool)
  // are never visited endpoint by endpoint: their classes are few.
  const bool marked = x->mark_codes(at);
  if (marked) {
    const auto& classes = x->classes();
    const std::size_t k = classes.size();
    table_.resize(k + 2);
    for (std::size_t c = 0; c < k; ++c) {
      // No zone or region (0) is shared with no one.
      const bool zone = at[2] != 0 && classes[c][0] == at[2];
      const bool region = at[3] != 0 && classes[c][1] == at[3];
      table_[c] = zone ? kLevelScores[2] : region ? kLevelScores[3] : kLevelScores[4];
    }
    table_[k] = kLevelScores[1];      // the peer's rack
    table_[k + 1] = kLevelScores[0];  // its host
    const double* table = table_.data();
    const std::uint32_t* codes = x->codes();
    const auto base = reinterpret_cast<std::uintptr_t>(x->view()->base);
    const std::size_t bytes = x->view()->size * sizeof(Endpoint);
    for (; i < n; ++i) {
      const std::uintptr_t d = reinterpret_cast<std::uintptr_t>(candidates[i]) - base;
      if (d >= bytes) [[unlikely]]
        break;
      out[i] = table[codes[d / sizeof(Endpoint)]];
    }
  }
  for (; i < n; ++i)
    out[i] = kLevelScores[static_cast<int>(TopologyExtractor::compare(at, x->ids(*candidates[i])))];
  if (marked) x->unmark_codes(at);
}

}  // namespace sluice::scheduling
