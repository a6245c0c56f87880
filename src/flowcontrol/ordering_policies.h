// Ordering policies (GIE plugin types): which request of a flow goes first.
#pragma once

#include <memory>
#include <string>

#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

// fcfs-ordering-policy: arrival order.
class FcfsOrdering final : public OrderingPolicy {
 public:
  std::string_view type() const override { return "fcfs-ordering-policy"; }
  bool before(const QueuedRequest& a, const QueuedRequest& b) const override {
    return a.sequence < b.sequence;
  }
  bool is_fifo() const override { return true; }
  bool has_order_key() const override { return true; }
  std::int64_t order_key(const QueuedRequest& r) const override {
    return static_cast<std::int64_t>(r.sequence);
  }
};

// edf-ordering-policy: earliest deadline (enqueue time + TTL) first; a request
// without a TTL goes after every request with one.
class EdfOrdering final : public OrderingPolicy {
 public:
  std::string_view type() const override { return "edf-ordering-policy"; }
  bool before(const QueuedRequest& a, const QueuedRequest& b) const override {
    return a.deadline.value_or(TimePoint::max()) < b.deadline.value_or(TimePoint::max());
  }
  bool has_order_key() const override { return true; }
  std::int64_t order_key(const QueuedRequest& r) const override {
    return r.deadline.value_or(TimePoint::max()).time_since_epoch().count();
  }
};

// slo-deadline-ordering-policy: earliest received time + x-slo-ttft-ms first;
// a request without the hint goes after every request with one.
class SloDeadlineOrdering final : public OrderingPolicy {
 public:
  std::string_view type() const override { return "slo-deadline-ordering-policy"; }
  bool before(const QueuedRequest& a, const QueuedRequest& b) const override {
    return a.slo_deadline.value_or(TimePoint::max()) < b.slo_deadline.value_or(TimePoint::max());
  }
  bool has_order_key() const override { return true; }
  std::int64_t order_key(const QueuedRequest& r) const override {
    return r.slo_deadline.value_or(TimePoint::max()).time_since_epoch().count();
  }
};

}  // namespace sluice::flowcontrol
