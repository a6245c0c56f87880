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
  void attach(const PoolView* view) override {
    view_ = view;
    ids_.attach(view);
    grouped_ = false;
  }

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

  // Inside a scheduler (attached to its view), the view's endpoints
  // grouped by value at each level, so that a pass touches the peer's
  // groups (8 + 32 endpoints for host and rack at 512) instead of reading
  // every candidate's row. mark(peer, loosest) notes for each endpoint of
  // the view the tightest level no looser than `loosest` it shares with
  // `peer`, as a byte by position (marks(): 0 none, level + 1), until
  // unmark(peer, loosest) clears the same groups (the pass that marked
  // calls it when done). False, and nothing marked, when not attached.
  bool mark(const Ids& peer, TopologyLevel loosest) const { return visit(peer, loosest, true); }
  void unmark(const Ids& peer, TopologyLevel loosest) const { visit(peer, loosest, false); }
  const std::uint8_t* marks() const { return marks_.data(); }
  TopologyLevel marked(std::size_t position) const {
    const std::uint8_t m = marks_[position];
    return m != 0 ? static_cast<TopologyLevel>(m - 1) : TopologyLevel::kNone;
  }
  // The region's number of the view's endpoints by position (after a
  // mark): the scorer marks host to zone and compares the region, which
  // most often holds the whole pool (no marking it endpoint by endpoint).
  const std::uint32_t* regions() const { return regions_.data(); }
  const std::uint32_t* zones() const { return zones_.data(); }
  std::uint32_t region_at(std::size_t position) const { return regions_[position]; }
  const PoolView* view() const { return view_; }

  // The scorer's one code by position: the endpoint's (zone, region) class
  // (0 .. classes().size() - 1, fixed per labels epoch: a pool has few),
  // except, between mark_codes(peer) and unmark_codes(peer), the peer's
  // rack (classes().size()) and host (classes().size() + 1). So a score is
  // one load of a per-pass table by code (issue 40: one code load a
  // candidate instead of a mark, a zone and a region).
  bool mark_codes(const Ids& peer) const { return code(peer, true); }
  void unmark_codes(const Ids& peer) const { code(peer, false); }
  const std::uint32_t* codes() const { return codes_.data(); }
  const std::vector<std::array<std::uint32_t, 2>>& classes() const { return classes_; }

 private:
  Ids intern(const Endpoint& e) const;
  void group() const;
  bool visit(const Ids& peer, TopologyLevel loosest, bool set) const;
  bool code(const Ids& peer, bool set) const;

  LabelNames labels_;
  // Memoized on the dispatcher thread, the one that runs the plugins.
  mutable LabelCache<Ids> ids_;
  mutable std::unordered_map<std::string, std::uint32_t> numbers_;  // value -> its number
  const PoolView* view_ = nullptr;
  // The groups: the positions with number v at level l are
  // members_[starts_[4v + l] .. starts_[4v + l + 1]), built for the view's
  // labels_epoch groups_epoch_ (none while !grouped_: not yet, or the
  // table renumbered).
  mutable bool grouped_ = false;
  mutable std::uint64_t groups_epoch_ = 0;
  mutable std::vector<std::uint32_t> starts_;
  mutable std::vector<std::uint32_t> members_;
  mutable std::vector<std::uint32_t> regions_;  // by position
  mutable std::vector<std::uint32_t> zones_;    // by position
  // mark's notes by position: 0 none, else the level + 1; all 0 between
  // passes (each pass clears the groups it marked).
  mutable std::vector<std::uint8_t> marks_;
  // (zone, region) by class; each position's class; the codes (the class
  // but where mark_codes put the peer's rack or host).
  mutable std::vector<std::array<std::uint32_t, 2>> classes_;
  mutable std::vector<std::uint32_t> class_of_;
  mutable std::vector<std::uint32_t> codes_;
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
