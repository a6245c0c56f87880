// The pool of model-server endpoints and their live state.
//
// The list itself is immutable once built; the per-endpoint counters are
// atomics so that every I/O thread can read and update them without a lock.
// (The flow-control issue moves the decisions onto the single dispatcher
// thread; these counters then become its in-flight credit.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace sluice::datalayer {

using Clock = std::chrono::steady_clock;

struct EndpointState {
  explicit EndpointState(config::EndpointConfig c) : config(std::move(c)) {}

  config::EndpointConfig config;
  std::atomic<int> in_flight{0};
  // steady_clock nanoseconds until which the endpoint is skipped (0: usable).
  std::atomic<std::int64_t> down_until_ns{0};
  std::atomic<std::uint64_t> connect_failures{0};
  // Last scraped metrics (written by the scraper thread, read anywhere).
  std::atomic<std::int64_t> metrics_ns{0};  // steady_clock time of the scrape; 0: never
  std::atomic<double> waiting{0};
  std::atomic<double> running{0};
  std::atomic<double> kv_cache_usage{0};

  void store_metrics(double w, double r, double kv, Clock::time_point at) {
    waiting.store(w, std::memory_order_relaxed);
    running.store(r, std::memory_order_relaxed);
    kv_cache_usage.store(kv, std::memory_order_relaxed);
    metrics_ns.store(at.time_since_epoch().count(), std::memory_order_release);
  }

  bool usable(Clock::time_point now) const {
    return down_until_ns.load(std::memory_order_relaxed) <= now.time_since_epoch().count();
  }
  void mark_down(Clock::time_point now, std::chrono::nanoseconds backoff) {
    down_until_ns.store((now + backoff).time_since_epoch().count(), std::memory_order_relaxed);
    connect_failures.fetch_add(1, std::memory_order_relaxed);
  }
  void mark_up() { down_until_ns.store(0, std::memory_order_relaxed); }
};

// RAII in-flight slot on one endpoint (Seastar semaphore_units style).
class InFlightPermit {
 public:
  InFlightPermit() = default;
  explicit InFlightPermit(EndpointState* ep) : ep_(ep) {
    ep_->in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  InFlightPermit(InFlightPermit&& o) noexcept : ep_(std::exchange(o.ep_, nullptr)) {}
  InFlightPermit& operator=(InFlightPermit&& o) noexcept {
    if (this != &o) {
      release();
      ep_ = std::exchange(o.ep_, nullptr);
    }
    return *this;
  }
  InFlightPermit(const InFlightPermit&) = delete;
  InFlightPermit& operator=(const InFlightPermit&) = delete;
  ~InFlightPermit() { release(); }

  void release() {
    if (ep_) ep_->in_flight.fetch_sub(1, std::memory_order_relaxed);
    ep_ = nullptr;
  }
  EndpointState* endpoint() const { return ep_; }

 private:
  EndpointState* ep_ = nullptr;
};

class EndpointSet {
 public:
  explicit EndpointSet(const std::vector<config::EndpointConfig>& configs);

  std::size_t size() const { return endpoints_.size(); }
  EndpointState& at(std::size_t i) { return *endpoints_[i]; }
  const EndpointState& at(std::size_t i) const { return *endpoints_[i]; }

 private:
  std::vector<std::unique_ptr<EndpointState>> endpoints_;
};

}  // namespace sluice::datalayer
