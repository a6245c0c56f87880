// Fairness policies (GIE plugin types plus VTC): which backlogged flow of a
// band is served next. One instance per band; per-flow state is kept in
// vectors indexed by FlowView::slot().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "flowcontrol/slot_heap.h"
#include "registry/huge_pages.h"
#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

// round-robin-fairness-policy: backlogged flows take turns, one request each.
// The ring is an intrusive list over flow slots (two 32-bit links a flow in
// one array): no allocation when a flow becomes backlogged, and its walk
// for upcoming() stays in a few hundred KB at 50 000 flows.
class RoundRobinFairness final : public FairnessPolicy {
 public:
  std::string_view type() const override { return "round-robin-fairness-policy"; }
  void on_backlogged(FlowView& flow) override;
  void on_idle(FlowView& flow) override;
  FlowView* pick() override;
  // The ring from its front: the picks to come while every flow stays
  // backlogged.
  std::size_t upcoming(FlowView** out, std::size_t max) override;
  void on_dispatched(FlowView& flow, const QueuedRequest& request) override;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Links {
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
  };
  void grow(std::uint32_t slot);
  void link_back(std::uint32_t slot);
  void unlink(std::uint32_t slot);
  registry::HugeVector<Links> links_;      // by slot
  registry::HugeVector<FlowView*> flows_;  // by slot; null: not in the ring
  std::uint32_t front_ = kNone;
  std::uint32_t back_ = kNone;
};

// global-strict-fairness-policy (GIE's default): the flow whose head request
// is best by the band's ordering policy, as if the band were one queue.
// With an ordering that has an order key (every built-in one) the
// backlogged flows are a SlotHeap of their heads' keys; otherwise a
// std::set that compares the heads themselves.
class GlobalStrictFairness final : public FairnessPolicy {
 public:
  GlobalStrictFairness() = default;
  GlobalStrictFairness(const GlobalStrictFairness&) = delete;  // its heap points back at it
  GlobalStrictFairness& operator=(const GlobalStrictFairness&) = delete;
  std::string_view type() const override { return "global-strict-fairness-policy"; }
  void set_ordering(const OrderingPolicy* ordering) override;
  void on_backlogged(FlowView& flow) override;
  void on_idle(FlowView& flow) override;
  void on_head_changed(FlowView& flow) override;
  FlowView* pick() override;
  // No upcoming(): its heap's smallest entries, prefetched as vtc's are,
  // measured no faster at 50 000 flows and 20% slower at 10 000 (a pass
  // of the benchmark, fcfs), and again +2% / -15% once the benchmark timed
  // the controller only. Each release's neighbours are loaded instead
  // (Controller::dispatch).

 private:
  static constexpr std::uint32_t kNotInHeap = UINT32_MAX;  // = SlotHeap's
  struct HeadOrder {
    const OrderingPolicy* ordering;
    bool operator()(const FlowView* a, const FlowView* b) const;
  };
  using Set = std::set<FlowView*, HeadOrder>;
  struct State {
    bool in_set = false;
    Set::iterator pos;
    std::uint32_t heap_pos = kNotInHeap;
    FlowView* flow = nullptr;
  };
  // A heap entry: the head's order key, then its arrival (as HeadOrder).
  struct Entry {
    std::int64_t key;
    std::uint64_t sequence;
    std::uint32_t slot;
  };
  struct EntryLess {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.key != b.key ? a.key < b.key : a.sequence < b.sequence;
    }
  };
  struct PlaceInState {
    GlobalStrictFairness* self;
    void operator()(std::uint32_t slot, std::uint32_t pos) const {
      self->states_[slot].heap_pos = pos;
    }
  };
  State& state(const FlowView& f);
  Entry entry(const FlowView& f) const;
  const OrderingPolicy* ordering_ = nullptr;
  bool keyed_ = false;  // the heap, not the set
  Set set_{HeadOrder{nullptr}};
  Set::node_type spare_;  // a node kept for reuse (its value is stale)
  SlotHeap<Entry, EntryLess, PlaceInState> heap_{EntryLess{}, PlaceInState{this}};
  registry::HugeVector<State> states_;
};

// vtc-fairness-policy: the Virtual Token Counter of "Fairness in Serving
// Large Language Models" (Sheng et al., OSDI '24). Each flow's counter is
// charged inputPrice x input tokens at dispatch and outputPrice x output
// tokens as they stream back, divided by the flow's weight; the backlogged
// flow with the smallest counter goes next (ties: the one served longest
// ago). A flow that becomes backlogged is lifted to the smallest counter of
// the backlogged flows (or, if none, of the last one served), so idling
// saves no credit. O(log F) per operation: the backlogged flows are an
// indexed 4-ary min-heap in one array (a flow's counter changes in place,
// touching a few contiguous entries, where a std::set of 50k flows costs a
// node allocation and a dozen cache misses per change).
class VtcFairness final : public FairnessPolicy {
 public:
  VtcFairness(double input_price = 1.0, double output_price = 2.0)
      : input_price_(input_price), output_price_(output_price) {}
  VtcFairness(const VtcFairness&) = delete;  // its heap points back at it
  VtcFairness& operator=(const VtcFairness&) = delete;
  std::string_view type() const override { return "vtc-fairness-policy"; }
  void on_backlogged(FlowView& flow) override;
  void on_idle(FlowView& flow) override;
  FlowView* pick() override;
  // The heap's smallest entries in order, by a best-first walk from its
  // root over at most max * 4 + 1 positions (its top levels, in cache).
  std::size_t upcoming(FlowView** out, std::size_t max) override;
  void on_dispatched(FlowView& flow, const QueuedRequest& request) override;
  void on_output_tokens(FlowView& flow, std::uint64_t tokens) override;
  void on_removed(FlowView& flow) override;
  void on_fleet_service(FlowView& flow, double service) override;
  std::optional<double> fleet_standing(const FlowView& flow) const override {
    return counter(flow);
  }
  std::optional<double> fleet_backlog_min() const override;
  void set_fleet_floor(std::optional<double> floor) override { fleet_floor_ = floor; }

  double counter(const FlowView& flow) const;
  // A counter as an unsigned integer in the same order (equal doubles, -0
  // and +0 too, equal integers), and back.
  static std::uint64_t order_bits(double counter);
  static double from_order_bits(std::uint64_t bits);

 private:
  static constexpr std::uint32_t kNotInHeap = UINT32_MAX;  // = SlotHeap's
  struct State {
    double counter = 0;
    std::uint64_t last_served = 0;
    std::uint32_t heap_pos = kNotInHeap;  // backlogged: its place in heap_
    FlowView* flow = nullptr;
    bool active() const { return heap_pos != kNotInHeap; }
  };
  // A heap entry: the flow's key (counter, last served, slot), copied so
  // that comparisons read only the heap, and packed into one 128-bit
  // integer so that they compile without branches (a sift picks the
  // smallest of four children by data the branch predictor cannot guess):
  //   high: the counter's bits, mapped so that unsigned order is the
  //         doubles' order (order_bits);
  //   low:  the last serve's sequence + 2^32, or for a flow never served
  //         its slot, which is below every served flow's (sequences are
  //         unique, so the slot breaks ties only among the never served).
  struct Entry {
    std::uint64_t high;
    std::uint64_t low;
    std::uint32_t slot;
    unsigned __int128 key() const { return (static_cast<unsigned __int128>(high) << 64) | low; }
  };
  struct EntryLess {
    static constexpr bool kBranchFree = true;  // SlotHeap selects without branches
    bool operator()(const Entry& a, const Entry& b) const { return a.key() < b.key(); }
  };
  static std::uint64_t serve_bits(std::uint64_t last_served, std::uint32_t slot) {
    return last_served != 0 ? last_served + (std::uint64_t{1} << 32) : slot;
  }
  // Keeps State::heap_pos of every entry the heap moves.
  struct PlaceInState {
    VtcFairness* self;
    void operator()(std::uint32_t slot, std::uint32_t pos) const {
      self->states_[slot].heap_pos = pos;
    }
  };
  State& state(const FlowView& f);
  void charge(FlowView& flow, double amount);
  void heap_push(std::uint32_t slot);
  double input_price_;
  double output_price_;
  // On huge pages (see registry/huge_pages.h): at 50 000 flows both are
  // read at random on every decision.
  SlotHeap<Entry, EntryLess, PlaceInState> heap_{EntryLess{}, PlaceInState{this}};
  registry::HugeVector<State> states_;
  double last_counter_ = 0;  // counter of the flow served last
  std::optional<double> fleet_floor_;
  std::uint64_t serve_seq_ = 0;
};

}  // namespace sluice::flowcontrol
