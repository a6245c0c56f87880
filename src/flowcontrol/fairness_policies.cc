#include "flowcontrol/fairness_policies.h"

#include <algorithm>

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
  return states_[f.slot()];
}

void GlobalStrictFairness::set_ordering(const OrderingPolicy* ordering) {
  ordering_ = ordering;
  std::vector<FlowView*> flows(set_.begin(), set_.end());
  set_ = Set(HeadOrder{ordering});
  for (auto* f : flows) state(*f).pos = set_.insert(f).first;
}

// The set's nodes are reused, not freed and allocated again: a head change
// moves the flow's own node (one per dispatch), and the node of the flow
// that went idle last is kept for the next one that becomes backlogged.
void GlobalStrictFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
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
  if (!s.in_set) return;
  auto node = set_.extract(s.pos);
  s.pos = set_.insert(std::move(node)).position;
}

FlowView* GlobalStrictFairness::pick() { return set_.empty() ? nullptr : *set_.begin(); }

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

void VtcFairness::heap_push(std::uint32_t slot) {
  const State& s = states_[slot];
  heap_.push_back(Entry{s.counter, s.last_served, slot});
  states_[slot].heap_pos = static_cast<std::uint32_t>(heap_.size() - 1);
  sift_up(static_cast<std::uint32_t>(heap_.size() - 1));
}

void VtcFairness::heap_erase(std::uint32_t pos) {
  states_[heap_[pos].slot].heap_pos = kNotInHeap;
  const Entry last = heap_.back();
  heap_.pop_back();
  if (pos == heap_.size()) return;
  place(pos, last);
  heap_update(pos);
}

void VtcFairness::heap_update(std::uint32_t pos) {
  if (pos > 0 && heap_[pos] < heap_[(pos - 1) / 4])
    sift_up(pos);
  else
    sift_down(pos);
}

void VtcFairness::sift_up(std::uint32_t pos) {
  const Entry e = heap_[pos];
  while (pos > 0) {
    const std::uint32_t parent = (pos - 1) / 4;
    if (!(e < heap_[parent])) break;
    place(pos, heap_[parent]);
    pos = parent;
  }
  place(pos, e);
}

void VtcFairness::sift_down(std::uint32_t pos) {
  const Entry e = heap_[pos];
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = std::size_t{pos} * 4 + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t last = std::min(first + 4, n);
    for (std::size_t c = first + 1; c < last; ++c)
      if (heap_[c] < heap_[best]) best = c;
    if (!(heap_[best] < e)) break;
    place(pos, heap_[best]);
    pos = static_cast<std::uint32_t>(best);
  }
  place(pos, e);
}

void VtcFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (s.active()) return;
  // No saving up credit while idle: start no lower than the flows that are
  // competing now (or, with none, than the last one served).
  // In a fleet, the flows competing elsewhere count too.
  double floor = heap_.empty() ? last_counter_ : heap_.front().counter;
  if (fleet_floor_) floor = heap_.empty() ? *fleet_floor_ : std::min(floor, *fleet_floor_);
  s.counter = std::max(s.counter, floor);
  heap_push(flow.slot());
}

void VtcFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (s.active()) heap_erase(s.heap_pos);
}

FlowView* VtcFairness::pick() { return heap_.empty() ? nullptr : states_[heap_.front().slot].flow; }

std::size_t VtcFairness::upcoming(FlowView** out, std::size_t max) {
  // A frontier of heap entries (copied, so that comparing them reads no
  // further) kept as a small binary heap of its own, smallest on top:
  // taking one adds its up to 4 children.
  constexpr std::size_t kMax = 32;
  max = std::min(max, kMax);
  if (max == 0 || heap_.empty()) return 0;
  struct Node {
    Entry key;
    std::uint32_t pos;
  };
  Node frontier[kMax * 3 + 1];
  std::size_t size = 0;
  auto later = [](const Node& a, const Node& b) { return b.key < a.key; };
  std::uint32_t slots[kMax];
  std::size_t n = 0;
  frontier[size++] = Node{heap_[0], 0};
  const std::size_t count = heap_.size();
  while (n < max && size > 0) {
    std::pop_heap(frontier, frontier + size, later);
    const Node top = frontier[--size];
    slots[n++] = top.key.slot;
    __builtin_prefetch(&states_[top.key.slot]);
    const std::size_t first = std::size_t{top.pos} * 4 + 1;
    const std::size_t last = std::min(first + 4, count);
    for (std::size_t c = first; c < last && size < std::size(frontier); ++c) {
      frontier[size++] = Node{heap_[c], static_cast<std::uint32_t>(c)};
      std::push_heap(frontier, frontier + size, later);
    }
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = states_[slots[i]].flow;
  return n;
}

void VtcFairness::charge(FlowView& flow, double amount) {
  auto& s = state(flow);
  s.counter += amount / std::max(flow.weight(), 1e-9);
  if (!s.active()) return;
  heap_[s.heap_pos].counter = s.counter;
  heap_update(s.heap_pos);
}

void VtcFairness::on_dispatched(FlowView& flow, const QueuedRequest& request) {
  auto& s = state(flow);
  s.last_served = ++serve_seq_;
  s.counter +=
      input_price_ * static_cast<double>(request.input_tokens) / std::max(flow.weight(), 1e-9);
  last_counter_ = s.counter;
  if (!s.active()) return;
  heap_[s.heap_pos].counter = s.counter;
  heap_[s.heap_pos].last_served = s.last_served;
  heap_update(s.heap_pos);
}

void VtcFairness::on_output_tokens(FlowView& flow, std::uint64_t tokens) {
  charge(flow, output_price_ * static_cast<double>(tokens));
}

void VtcFairness::on_fleet_service(FlowView& flow, double service) {
  if (service > 0) charge(flow, service);
}

std::optional<double> VtcFairness::fleet_backlog_min() const {
  if (heap_.empty()) return std::nullopt;
  return heap_.front().counter;
}

void VtcFairness::on_removed(FlowView& flow) {
  on_idle(flow);
  states_[flow.slot()] = State{};
}

}  // namespace sluice::flowcontrol
