// program-aware-fairness (llm-d's flowcontrol fairness plugin of that name,
// strategy "las": Least Attained Service). A program is a fairness id; its
// attained service is input tokens + 2 x output tokens, decayed with a
// half-life in wall-clock time. Each pick scores every backlogged flow of
// the band:
//   score = lasWeightService  x (1 - norm(service))
//         + lasWeightHeadWait x norm(head wait)
// with norm(v) = (v - min) / (max - min) over the backlogged flows (0.5 when
// all are equal), and serves the highest (ties: the older head, then the
// earlier arrival). The head wait is measured from the head request's
// enqueue time; normalised, it does not depend on when it is measured.
//
// Unlike the other policies, a pick costs O(backlogged flows of the band)
// (llm-d's definition normalises over all of them); flows are bounded by
// flowControl.maxFlows.
//
// Per-program state (service, waits, in flight) outlives its flow, as in
// llm-d: a program idle past evictionTtlSeconds with nothing in flight is
// swept every evictionSweepSeconds, and the table never holds more than
// maxPrograms (a new program past it takes the place of the one idle the
// longest; when every one is backlogged or in flight the new one is not
// tracked and counts as having no service).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

class ProgramAwareFairness final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "program-aware-fairness";
  using ClockFn = std::function<TimePoint()>;
  explicit ProgramAwareFairness(
      ProgramAwareParams params, ClockFn clock = [] { return Clock::now(); });

  std::string_view type() const override { return kType; }
  void on_backlogged(FlowView& flow) override;
  void on_idle(FlowView& flow) override;
  FlowView* pick() override;
  void on_dispatched(FlowView& flow, const QueuedRequest& request) override;
  void on_output_tokens(FlowView& flow, std::uint64_t tokens) override;
  void on_completed(FlowView& flow) override;
  void on_removed(FlowView& flow) override;

  // What the metrics show (llm-d's llm_d_epp_program_aware_*), at `now`.
  struct ProgramStats {
    std::string id;
    double attained_service = 0;  // decayed to now, weighted tokens
    double avg_wait_ms = 0;       // mean queue wait of its dispatched requests
    std::uint64_t waits = 0;
    std::uint32_t in_flight = 0;
  };
  std::vector<ProgramStats> stats() const;
  // Jain's fairness index over the programs' mean waits (those with one).
  double jains_fairness_index() const;
  std::size_t program_count() const { return programs_.size(); }
  // The program's attained service decayed to now; 0 when not tracked.
  double attained_service(const std::string& id) const;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Program {
    double service = 0;  // at `anchor`
    TimePoint anchor{};
    TimePoint last_completion{};
    double wait_ms_sum = 0;
    std::uint64_t waits = 0;
    std::uint32_t in_flight = 0;
    std::uint32_t slot = kNone;  // the band's flow of this id, while it exists
    bool backlogged = false;
  };
  struct SlotState {
    Program* program = nullptr;
    FlowView* flow = nullptr;
    std::uint32_t active_pos = kNone;  // in active_, while backlogged
  };
  // Scratch of one pick, per backlogged flow (reused: no allocation per pick).
  struct Candidate {
    double service;
    TimePoint enqueued;
    std::uint64_t sequence;
  };
  SlotState& slot_state(const FlowView& flow);
  Program* program_for(const FlowView& flow, TimePoint now);
  bool make_room(TimePoint now);
  void sweep(TimePoint now);
  void erase(std::unordered_map<std::string, Program>::iterator it);
  double decayed(const Program& p, TimePoint now) const;
  void add_service(Program& p, double cost, TimePoint now);

  ProgramAwareParams params_;
  ClockFn clock_;
  std::unordered_map<std::string, Program> programs_;
  std::vector<SlotState> slots_;       // by flow slot
  std::vector<std::uint32_t> active_;  // slots of the backlogged flows
  std::vector<Candidate> scratch_;
  std::optional<TimePoint> next_sweep_;
};

}  // namespace sluice::flowcontrol
