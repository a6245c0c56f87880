#include "flowcontrol/fairness_policies.h"

#include <algorithm>

namespace sluice::flowcontrol {

// ---------------------------------------------------------------- round robin

RoundRobinFairness::State& RoundRobinFairness::state(const FlowView& f) {
  if (f.slot() >= states_.size()) states_.resize(f.slot() + 1);
  return states_[f.slot()];
}

void RoundRobinFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (s.in_ring) return;
  s.pos = ring_.insert(ring_.end(), &flow);
  s.in_ring = true;
}

void RoundRobinFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (!s.in_ring) return;
  ring_.erase(s.pos);
  s.in_ring = false;
}

FlowView* RoundRobinFairness::pick() { return ring_.empty() ? nullptr : ring_.front(); }

void RoundRobinFairness::on_dispatched(FlowView& flow, const QueuedRequest&) {
  auto& s = state(flow);
  // The flow had its turn: to the back of the ring (if still backlogged).
  if (s.in_ring) ring_.splice(ring_.end(), ring_, s.pos);
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

void GlobalStrictFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (s.in_set) return;
  s.pos = set_.insert(&flow).first;
  s.in_set = true;
}

void GlobalStrictFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (!s.in_set) return;
  set_.erase(s.pos);  // by position: the flow's key (its head) has changed
  s.in_set = false;
}

void GlobalStrictFairness::on_head_changed(FlowView& flow) {
  auto& s = state(flow);
  if (!s.in_set) return;
  set_.erase(s.pos);
  s.pos = set_.insert(&flow).first;
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

void VtcFairness::on_backlogged(FlowView& flow) {
  auto& s = state(flow);
  if (s.active) return;
  // No saving up credit while idle: start no lower than the flows that are
  // competing now (or, with none, than the last one served).
  // In a fleet, the flows competing elsewhere count too.
  double floor = active_.empty() ? last_counter_ : std::get<0>(*active_.begin());
  if (fleet_floor_) floor = active_.empty() ? *fleet_floor_ : std::min(floor, *fleet_floor_);
  s.counter = std::max(s.counter, floor);
  active_.emplace(s.counter, s.last_served, flow.slot());
  s.active = true;
}

void VtcFairness::on_idle(FlowView& flow) {
  auto& s = state(flow);
  if (!s.active) return;
  active_.erase(Key{s.counter, s.last_served, flow.slot()});
  s.active = false;
}

FlowView* VtcFairness::pick() {
  if (active_.empty()) return nullptr;
  return states_[std::get<2>(*active_.begin())].flow;
}

void VtcFairness::charge(FlowView& flow, double amount) {
  auto& s = state(flow);
  if (s.active) active_.erase(Key{s.counter, s.last_served, flow.slot()});
  s.counter += amount / std::max(flow.weight(), 1e-9);
  if (s.active) active_.emplace(s.counter, s.last_served, flow.slot());
}

void VtcFairness::on_dispatched(FlowView& flow, const QueuedRequest& request) {
  auto& s = state(flow);
  if (s.active) active_.erase(Key{s.counter, s.last_served, flow.slot()});
  s.last_served = ++serve_seq_;
  s.counter +=
      input_price_ * static_cast<double>(request.input_tokens) / std::max(flow.weight(), 1e-9);
  if (s.active) active_.emplace(s.counter, s.last_served, flow.slot());
  last_counter_ = s.counter;
}

void VtcFairness::on_output_tokens(FlowView& flow, std::uint64_t tokens) {
  charge(flow, output_price_ * static_cast<double>(tokens));
}

void VtcFairness::on_fleet_service(FlowView& flow, double service) {
  if (service > 0) charge(flow, service);
}

std::optional<double> VtcFairness::fleet_backlog_min() const {
  if (active_.empty()) return std::nullopt;
  return std::get<0>(*active_.begin());
}

void VtcFairness::on_removed(FlowView& flow) {
  on_idle(flow);
  states_[flow.slot()] = State{};
}

}  // namespace sluice::flowcontrol
