// topology-affinity-filter and topology-affinity-scorer (llm-d): place the
// prefill near the decode endpoint already chosen (the peer, see
// topology.h), so the KV cache moves over NVLink (same host) rather than
// the network.
//
// Filter: keeps the candidates that share at least `minAffinity` (host,
// rack, zone or region; default host) with the peer. It fails open — the
// candidates pass unchanged — when there is no peer, the peer has no
// topology, or no candidate qualifies: topology is a preference and never
// makes a request unroutable. A candidate without topology never
// qualifies.
// Scorer: by the tightest level shared with the peer: host 1, rack 0.2,
// zone 0.05, region 0.02, none 0 (llm-d's fixed curve, shaped by the
// transfer bandwidth at each level); every candidate 0 without a peer
// topology.
// Both read the topology through a topology-extractor: the one named by
// `topologyProducerName`, else the only one declared; none declared, no
// endpoint has a topology (llm-d's behaviour, with a startup warning).
#pragma once

#include "scheduling/plugins/topology.h"

namespace sluice::scheduling {

class TopologyAffinityFilter final : public Plugin, public Filter {
 public:
  static constexpr std::string_view kType = "topology-affinity-filter";
  TopologyAffinityFilter(const TopologyExtractor* extractor, TopologyLevel min_affinity)
      : extractor_(extractor), min_affinity_(min_affinity) {}
  std::string_view type() const override { return kType; }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;
  TopologyLevel min_affinity() const { return min_affinity_; }
  const TopologyExtractor* extractor() const { return extractor_; }

 private:
  const TopologyExtractor* extractor_;
  TopologyLevel min_affinity_;
  std::vector<std::uint32_t> near_;  // scratch: the qualifying candidates' positions
};

class TopologyAffinityScorer final : public Plugin, public Scorer {
 public:
  static constexpr std::string_view kType = "topology-affinity-scorer";
  // The score of each level, host first, then none.
  static constexpr double kLevelScores[5] = {1.0, 0.2, 0.05, 0.02, 0.0};
  explicit TopologyAffinityScorer(const TopologyExtractor* extractor) : extractor_(extractor) {}
  std::string_view type() const override { return kType; }
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) override;
  std::uint32_t columns_read() const override { return 0; }
  const TopologyExtractor* extractor() const { return extractor_; }

 private:
  const TopologyExtractor* extractor_;
  std::vector<double> table_;  // this pass's score by code (TopologyExtractor::codes)
};

}  // namespace sluice::scheduling
