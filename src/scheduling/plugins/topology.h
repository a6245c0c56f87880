// Topology for prefill/decode placement (llm-d's topology-extractor,
// topology-affinity-filter and topology-affinity-scorer).
//
// topology-extractor: an endpoint's topology is four of its labels, named
// by the parameters hostname (default kubernetes.io/hostname), rack
// (topology.kubernetes.io/rack), zone (topology.kubernetes.io/zone) and
// region (topology.kubernetes.io/region); an empty parameter means the
// default. sluice endpoints carry labels in the config and the endpoints
// file, so the labels are read where they are (llm-d reads the pod's, and
// falls back to the pod's spec.hostname, which sluice has no pod for).
//
// Two endpoints are compared at the tightest level where both have the
// same non-empty value: host, then rack, zone, region; else none (as
// llm-d: a level is not required to match above it, and an empty value
// never matches).
//
// The peer: disagg-profile-handler runs the decode profile first and puts
// its endpoint in the cycle under kPeerEndpointKey before the prefill
// profile runs, so the prefill filters and scorers see where decode is.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "scheduling/plugins/label_cache.h"
#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::config {
struct Config;
}

namespace sluice::scheduling {

enum class TopologyLevel : int { kHost = 0, kRack, kZone, kRegion, kNone };

// "host", "rack", "zone", "region" (and "none").
std::string_view level_name(TopologyLevel level);
std::optional<TopologyLevel> parse_level(std::string_view name);

// The endpoint chosen by the profile that ran before (decode, for the
// prefill profile), put by disagg-profile-handler.
inline const CycleKey<const Endpoint*> kPeerEndpointKey;

class TopologyExtractor final : public Plugin, public PoolViewer {
 public:
  static constexpr std::string_view kType = "topology-extractor";
  // Label names, tightest level first.
  using LabelNames = std::array<std::string, 4>;
  static LabelNames default_labels() {
    return {"kubernetes.io/hostname", "topology.kubernetes.io/rack", "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region"};
  }
  explicit TopologyExtractor(LabelNames labels) : labels_(std::move(labels)) {}
  std::string_view type() const override { return kType; }
  void attach(const PoolView* view) override { ids_.attach(view); }

  const LabelNames& labels() const { return labels_; }
  // The endpoint's value at `level` ("" when it has none).
  std::string_view value(const Endpoint& e, TopologyLevel level) const;
  // Whether the endpoint has any non-empty topology value.
  bool has_topology(const Endpoint& e) const;
  // The tightest level `peer` and `candidate` share.
  TopologyLevel compare(const Endpoint& peer, const Endpoint& candidate) const;
  // The same with the peer's values read once (a cycle compares one peer
  // with every candidate); they point into the peer's labels.
  using Values = std::array<std::string_view, 4>;
  Values values(const Endpoint& e) const;
  // The tightest shared level no looser than `loosest` (kNone past it):
  // reads the candidate's labels only up to that level.
  TopologyLevel compare(const Values& peer, const Endpoint& candidate,
                        TopologyLevel loosest = TopologyLevel::kRegion) const;

  // The same values as small numbers, what a cycle reads: 0 for none
  // (absent or empty), else the value's number in this extractor's table,
  // so two endpoints share a level when both numbers there are equal and
  // not 0. Kept by slot until the endpoint's labels change (no label
  // lookup per endpoint per cycle).
  using Ids = std::array<std::uint32_t, 4>;
  const Ids& ids(const Endpoint& e) const {
    return ids_.get(e, [this](const Endpoint& x) { return intern(x); });
  }
  // This cycle's ids for a loop over candidates: pass.find(e), else ids(e).
  using IdsPass = LabelCache<Ids>::Pass;
  IdsPass ids_pass() const {
    return ids_.pass([this](const Endpoint& x) { return intern(x); });
  }
  // Called before a pass that compares ids: the table is renumbered here,
  // if ever (when it holds far more values than the pool can: labels that
  // changed over time), never within a pass.
  void begin_pass() const;
  // Whether they share a level no looser than `loosest` (compare(...) <=
  // loosest), without a branch per level.
  static bool near(const Ids& peer, const Ids& candidate, TopologyLevel loosest) {
    const auto last = std::min(static_cast<std::size_t>(loosest), peer.size() - 1);
    unsigned shared = 0;
    for (std::size_t l = 0; l <= last; ++l)
      shared |=
          static_cast<unsigned>(peer[l] != 0) & static_cast<unsigned>(peer[l] == candidate[l]);
    return shared != 0;
  }
  static TopologyLevel compare(const Ids& peer, const Ids& candidate,
                               TopologyLevel loosest = TopologyLevel::kRegion) {
    const auto last = static_cast<std::size_t>(loosest);
    for (std::size_t l = 0; l <= last && l < peer.size(); ++l)
      if (peer[l] != 0 && peer[l] == candidate[l]) return static_cast<TopologyLevel>(l);
    return TopologyLevel::kNone;
  }

 private:
  Ids intern(const Endpoint& e) const;

  LabelNames labels_;
  // Memoized on the dispatcher thread, the one that runs the plugins.
  mutable LabelCache<Ids> ids_;
  mutable std::unordered_map<std::string, std::uint32_t> numbers_;  // value -> its number
};

// The startup warning for a topology-affinity plugin that can see no
// topology: none when no topology-* plugin is declared or some endpoint of
// `pool` carries one of the extractor's labels; else one line naming the
// plugins and the labels (or the missing topology-extractor). Called by the
// application whenever the endpoint pool changes.
std::string topology_warning(const config::Config& config, std::span<const Labels* const> pool);
// The same for the config's own `endpoints:` (at startup, before the
// endpoints file and DNS add theirs).
std::string topology_warning(const config::Config& config);

}  // namespace sluice::scheduling
