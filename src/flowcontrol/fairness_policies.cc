#include "flowcontrol/fairness_policies.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sluice::flowcontrol {

// ---------------------------------------------------------------- round robin

void RoundRobinFairness::grow(std::uint32_t slot) {
  if (slot >= links_.size()) {
    links_.resize(slot + 1);
    flows_.resize(slot + 1, nullptr);
  }
}

void RoundRobinFairness::link_back(std::uint32_t slot) {
  links_[slot] = Links{back_, kNone};
  (back_ == kNone ? front_ : links_[back_].next) = slot;
  back_ = slot;
}

void RoundRobinFairness::unlink(std::uint32_t slot) {
  const Links l = links_[slot];
  (l.prev == kNone ? front_ : links_[l.prev].next) = l.next;
  (l.next == kNone ? back_ : links_[l.next].prev) = l.prev;
  links_[slot] = Links{};
}

void RoundRobinFairness::on_backlogged(FlowView& flow) {
  const std::uint32_t slot = flow.slot();
  grow(slot);
  if (flows_[slot]) return;
  flows_[slot] = &flow;
  link_back(slot);
}

void RoundRobinFairness::on_idle(FlowView& flow) {
  const std::uint32_t slot = flow.slot();
  if (slot >= flows_.size() || !flows_[slot]) return;
  unlink(slot);
  flows_[slot] = nullptr;
}

FlowView* RoundRobinFairness::pick() { return front_ == kNone ? nullptr : flows_[front_]; }

std::size_t RoundRobinFairness::upcoming(FlowView** out, std::size_t max) {
  // The ring's links are 8 bytes a flow, so walking them mostly hits the
  // cache; the flows' pointers are loaded together afterwards.
  std::uint32_t slots[32];
  max = std::min<std::size_t>(max, std::size(slots));
  std::size_t n = 0;
  for (std::uint32_t at = front_; at != kNone && n < max; at = links_[at].next) {
    slots[n++] = at;
    __builtin_prefetch(&flows_[at]);
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = flows_[slots[i]];
  return n;
}

void RoundRobinFairness::on_dispatched(FlowView& flow, const QueuedRequest&) {
  // The flow had its turn: to the back of the ring (if still backlogged).
  const std::uint32_t slot = flow.slot();
  if (slot >= flows_.size() || !flows_[slot] || back_ == slot) return;
  unlink(slot);
  link_back(slot);
}

// ---------------------------------------------------------------- global strict

bool GlobalStrictFairness::HeadOrder::operator()(const FlowView* a, const FlowView* b) const {
  const QueuedRequest* ha = a->head();
  const QueuedRequest* hb = b->head();
  if (ordering->before(*ha, *hb)) return true;
  if (ordering->before(*hb, *ha)) return false;
  return ha->sequence < hb->sequence;
}

GlobalStrictFairness::State& GlobalStrictFairness::state(const FlowView& f) {
  if (f.slot() >= states_.size()) states_.resize(f.slot() + 1);
  auto& s = states_[f.slot()];
  s.flow = const_cast<FlowView*>(&f);
  return s;
}

GlobalStrictFairness::Entry GlobalStrictFairness::entry(const FlowView& f) const {
  const QueuedRequest* head = f.head();
  return Entry{ordering_->order_key(*head), head->sequence, f.slot()};
}

void GlobalStrictFairness::set_ordering(const OrderingPolicy* ordering) {
  // Every backlogged flow is learnt again under the new order (also how
  // the registry has it sort again after queued keys changed).
  std::vector<FlowView*> flows;
  if (keyed_) {
    for (std::uint32_t pos = 0; pos < heap_.size(); ++pos)
      flows.push_back(states_[heap_[pos].slot].flow);
    heap_.clear();
  } else {
    flows.assign(set_.begin(), set_.end());
    for (FlowView* f : flows) state(*f).in_set = false;
  }
  ordering_ = ordering;
  keyed_ = ordering && ordering->has_order_key();
  set_ = Set(HeadOrder{ordering});
  spare_ = {};
  for (FlowView* f : flows) on_backlogged(*f);
}

// The set's nodes are reused, not freed and allocated again: a head change
// moves the flow's own node (one per dispatch), and the node of the flow
// that went idle last is kept for the next one that becomes backlogged.
void GlobalStrictFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (keyed_) {
    if (s.heap_pos == kNotInHeap) heap_.push(entry(flow));
    return;
  }
  if (s.in_set) return;
  if (spare_) {
    spare_.value() = &flow;
    s.pos = set_.insert(std::move(spare_)).position;
  } else {
    s.pos = set_.insert(&flow).first;
  }
  s.in_set = true;
}

void GlobalStrictFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (keyed_) {
    if (s.heap_pos != kNotInHeap) heap_.erase(s.heap_pos);
    return;
  }
  if (!s.in_set) return;
  // By position: the flow's key (its head) has changed.
  if (spare_) {
    set_.erase(s.pos);
  } else {
    spare_ = set_.extract(s.pos);
  }
  s.in_set = false;
}

void GlobalStrictFairness::on_head_changed(FlowView& flow) {
  auto& s = state(flow);
  if (keyed_) {
    if (s.heap_pos == kNotInHeap) return;
    heap_[s.heap_pos] = entry(flow);
    heap_.update(s.heap_pos);
    return;
  }
  if (!s.in_set) return;
  auto node = set_.extract(s.pos);
  s.pos = set_.insert(std::move(node)).position;
}

FlowView* GlobalStrictFairness::pick() {
  if (keyed_) return heap_.empty() ? nullptr : states_[heap_.top().slot].flow;
  return set_.empty() ? nullptr : *set_.begin();
}

// ---------------------------------------------------------------- VTC

VtcFairness::State& VtcFairness::state(const FlowView& f) {
  if (f.slot() >= states_.size()) states_.resize(f.slot() + 1);
  auto& s = states_[f.slot()];
  s.flow = const_cast<FlowView*>(&f);
  return s;
}

double VtcFairness::counter(const FlowView& flow) const {
  return flow.slot() < states_.size() ? states_[flow.slot()].counter : 0;
}

// Doubles as unsigned integers in the same order: a non-negative double's
// bits with the sign bit set, a negative one's bits inverted. -0 is made
// +0 first (they are equal as doubles; here the next field must decide).
std::uint64_t VtcFairness::order_bits(double counter) {
  // A NaN (of either sign; config takes finite prices only, so none is
  // expected) goes last, as an infinite counter would, not first.
  if (std::isnan(counter)) return UINT64_MAX;
  const auto bits = std::bit_cast<std::uint64_t>(counter + 0.0);
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

double VtcFairness::from_order_bits(std::uint64_t bits) {
  return std::bit_cast<double>((bits >> 63) != 0 ? bits & ~(std::uint64_t{1} << 63) : ~bits);
}

void VtcFairness::heap_push(std::uint32_t slot) {
  const State& s = states_[slot];
  heap_.push(Entry{order_bits(s.counter), serve_bits(s.last_served, slot), slot});
}

void VtcFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (s.active()) return;
  // No saving up credit while idle: start no lower than the flows that are
  // competing now (or, with none, than the last one served).
  // In a fleet, the flows competing elsewhere count too.
  double floor = heap_.empty() ? last_counter_ : from_order_bits(heap_.top().high);
  if (fleet_floor_) floor = heap_.empty() ? *fleet_floor_ : std::min(floor, *fleet_floor_);
  s.counter = std::max(s.counter, floor);
  heap_push(flow.slot());
}

void VtcFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (s.active()) heap_.erase(s.heap_pos);
}

FlowView* VtcFairness::pick() { return heap_.empty() ? nullptr : states_[heap_.top().slot].flow; }

std::size_t VtcFairness::upcoming(FlowView** out, std::size_t max) {
  std::uint32_t at[32];
  const std::size_t n = heap_.smallest(at, std::min<std::size_t>(max, std::size(at)));
  for (std::size_t i = 0; i < n; ++i) {
    at[i] = heap_[at[i]].slot;
    __builtin_prefetch(&states_[at[i]]);
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = states_[at[i]].flow;
  return n;
}

void VtcFairness::charge(FlowView& flow, double amount) {
  auto& s = state(flow);
  s.counter += amount / std::max(flow.weight(), 1e-9);
  if (!s.active()) return;
  heap_[s.heap_pos].high = order_bits(s.counter);
  heap_.update(s.heap_pos);
}

void VtcFairness::on_dispatched(FlowView& flow, const QueuedRequest& request) {
  auto& s = state(flow);
  s.last_served = ++serve_seq_;
  s.counter +=
      input_price_ * static_cast<double>(request.input_tokens) / std::max(flow.weight(), 1e-9);
  last_counter_ = s.counter;
  if (!s.active()) return;
  heap_[s.heap_pos].high = order_bits(s.counter);
  heap_[s.heap_pos].low = serve_bits(s.last_served, flow.slot());
  heap_.update(s.heap_pos);
}

void VtcFairness::on_output_tokens(FlowView& flow, std::uint64_t tokens) {
  charge(flow, output_price_ * static_cast<double>(tokens));
}

void VtcFairness::on_fleet_service(FlowView& flow, double service) {
  if (service > 0) charge(flow, service);
}

std::optional<double> VtcFairness::fleet_backlog_min() const {
  if (heap_.empty()) return std::nullopt;
  return from_order_bits(heap_.top().high);
}

void VtcFairness::on_removed(FlowView& flow) {
  on_idle(flow);
  states_[flow.slot()] = State{};
}

}  // namespace sluice::flowcontrol
