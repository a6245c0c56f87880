// disagg-profile-handler (llm-d): prefill/decode disaggregation. The decode
// profile always runs first and its endpoint is the request's destination;
// the prefill profile runs when the prefill decider says so for that decode
// endpoint, and the decode endpoint learns the prefill endpoint from
// `x-prefiller-host-port`.
//
// Topology (sluice): endpoints may carry hierarchical topology labels,
// outermost first (default: topology.kubernetes.io/zone ⊃ block ⊃ rack).
// When prefill ran, the handler may choose a pair other than the two
// individual best if it shares a deeper level — the same rack, else the
// same block, else the same zone — and its combined score (the mean of
// the two profiles' normalized scores) is within `margin` of the best
// pair's. The KV transfer between a close pair is cheaper than the score
// difference.
//
// Parameters: profiles {decode, prefill}, deciders {prefill}, (llm-d's flat
// decodeProfile / prefillProfile / deciderPluginName), topology {labels,
// margin}.
//
// Metrics (llm-d's llm_d_epp_disagg_decision_total): each answer with a
// decode endpoint counts one decision, `prefill-decode` when a prefill
// endpoint takes part, else `decode-only` (the prefill decider said no, or
// the prefill profile found no endpoint), by the request's model. Counted in
// process_results on the dispatcher thread (plain integers: the scrape copies
// them there); past kMaxDecisionModels model names, new ones are summed under
// "(other)".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduling/plugins/prefix_based_pd_decider.h"

namespace sluice::scheduling {

inline constexpr std::string_view kPrefillerHeader = "x-prefiller-host-port";

struct TopologyParams {
  std::vector<std::string> labels = {"topology.kubernetes.io/zone", "block",
                                     "rack"};  // outermost first
  double margin = 0.1;
  bool enabled = true;
};

class DisaggProfileHandler final : public Plugin, public ProfileHandler {
 public:
  static constexpr std::string_view kType = "disagg-profile-handler";
  DisaggProfileHandler(std::string decode_profile, std::string prefill_profile, PdDecider* decider,
                       TopologyParams topology)
      : decode_(std::move(decode_profile)),
        prefill_(std::move(prefill_profile)),
        decider_(decider),
        topology_(std::move(topology)) {}
  std::string_view type() const override { return kType; }
  void pick(CycleState& cycle, const Request& request, std::span<const Profile> profiles,
            std::span<const ProfileResult> results, std::vector<const Profile*>& next) override;
  SchedulingResult process_results(CycleState& cycle, const Request& request,
                                   std::span<const ProfileResult> results) override;

  const std::string& decode_profile() const { return decode_; }
  const std::string& prefill_profile() const { return prefill_; }

  // How many topology levels (outermost first) `a` and `b` share: 0 = not
  // even the outermost.
  int shared_levels(const Endpoint& a, const Endpoint& b) const;

  struct DecisionCounts {
    std::uint64_t decode_only = 0;
    std::uint64_t prefill_decode = 0;
  };
  static constexpr std::size_t kMaxDecisionModels = 100;
  static constexpr std::string_view kOtherModel = "(other)";
  // By model name ("unknown" for none, as llm-d). Dispatcher thread only.
  const std::map<std::string, DecisionCounts, std::less<>>& decisions() const { return decisions_; }

 private:
  void count_decision(std::string_view model, bool prefill_used);
  // Each scored endpoint's key at every topology level (a hash of its
  // first n label values; depth: how many levels it has labels for).
  void level_keys(const ProfileResult& r, std::vector<std::uint64_t>& keys,
                  std::vector<int>& depth) const;
  // The best pair sharing `want` levels: what the scan of every decode x
  // prefill pair would find (the first among equals in decode, then
  // prefill order), in O(decode + prefill) by grouping prefill endpoints
  // by their key at that level.
  bool best_pair_at(const ProfileResult& decode, const ProfileResult& prefill, int want,
                    const Endpoint*& bd, const Endpoint*& bp, double& bs);

  std::string decode_;
  std::string prefill_;
  PdDecider* decider_;
  TopologyParams topology_;
  std::map<std::string, DecisionCounts, std::less<>> decisions_;
  // Reused between cycles (dispatcher thread): no allocation per pair.
  struct Best2 {
    const ScoredEndpoint* first = nullptr;
    const ScoredEndpoint* second = nullptr;
  };
  std::vector<std::uint64_t> decode_keys_, prefill_keys_;
  std::vector<int> decode_depth_, prefill_depth_;
  std::unordered_map<std::uint64_t, Best2> groups_;
};

}  // namespace sluice::scheduling
