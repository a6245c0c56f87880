// The pool of model-server endpoints and their live state.
//
// Slots only grow: an endpoint added at runtime (endpoints file) gets the
// next slot, published with a release store of the size; a removed one is
// marked removed and keeps its slot, so requests in flight on it finish and
// indexes held anywhere stay valid. An address that comes back gets its old
// slot. Readers on any thread need no lock; one thread (the data layer's)
// adds and removes. The per-endpoint counters are atomics.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
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
  boost::asio::ip::tcp::endpoint resolved;  // set before the slot is published
  std::atomic<bool> removed{false};
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

  // Passive health (Envoy's outlier detection), written by the I/O threads:
  // failures since the last success (connect refused or timed out, reset or
  // EOF before any response byte, a malformed response head), ejections
  // since the last success (the next one lasts base x 2^that), and all
  // ejections (for /metrics).
  std::atomic<std::uint32_t> consecutive_failures{0};
  std::atomic<std::uint32_t> ejections_in_a_row{0};
  std::atomic<std::uint64_t> ejections{0};

  // Not removed, not down after a refused connection, not ejected.
  bool usable(Clock::time_point now) const {
    return !removed.load(std::memory_order_relaxed) &&
           down_until_ns.load(std::memory_order_relaxed) <= now.time_since_epoch().count();
  }
  // A refused connection: skipped for `backoff` (server.endpointDownBackoff)
  // at once, however many failures came before. Never shortens an ejection.
  void mark_down(Clock::time_point now, std::chrono::nanoseconds backoff) {
    skip_until(now + backoff);
    connect_failures.fetch_add(1, std::memory_order_relaxed);
  }
  void mark_up() { down_until_ns.store(0, std::memory_order_relaxed); }
  // A complete response: the failure streak and the ejection backoff start
  // over. Hot path: no write unless there is something to reset.
  void record_success() {
    if (consecutive_failures.load(std::memory_order_relaxed) != 0)
      consecutive_failures.store(0, std::memory_order_relaxed);
    if (ejections_in_a_row.load(std::memory_order_relaxed) != 0)
      ejections_in_a_row.store(0, std::memory_order_relaxed);
  }
  // Moves down_until_ns forward to `until` (never back); true if it did.
  bool skip_until(Clock::time_point until) {
    const std::int64_t want = until.time_since_epoch().count();
    std::int64_t cur = down_until_ns.load(std::memory_order_relaxed);
    while (cur < want)
      if (down_until_ns.compare_exchange_weak(cur, want, std::memory_order_relaxed)) return true;
    return false;
  }
};

// Passive health settings (server.endpointEjection*).
struct EjectionPolicy {
  std::uint32_t consecutive_failures = 3;  // 0: never eject
  std::chrono::nanoseconds base_time = std::chrono::seconds(1);
  std::chrono::nanoseconds max_time = std::chrono::seconds(30);
};

// What one recorded failure did.
enum class FailureVerdict {
  kCounted,  // below the threshold, or already ejected
  kEjected,  // ejected now, for EndpointSet::record_failure's `backoff`
  kSpared,   // at the threshold, but it is the last usable endpoint
};

// RAII in-flight slot on one endpoint (Seastar semaphore_units style).
class InFlightPermit {
 public:
  InFlightPermit() = default;
  explicit InFlightPermit(EndpointState* ep) : ep_(ep) {
    ep_->in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  // Also says how many were in flight before this one (taking the slot and
  // counting the others is one step: two threads never both see room for
  // the last slot).
  InFlightPermit(EndpointState* ep, int& in_flight_before) : ep_(ep) {
    in_flight_before = ep_->in_flight.fetch_add(1, std::memory_order_relaxed);
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
  static constexpr std::size_t kMaxEndpoints = config::kMaxEndpoints;

  explicit EndpointSet(const std::vector<config::EndpointConfig>& configs);

  std::size_t size() const { return size_.load(std::memory_order_acquire); }
  EndpointState& at(std::size_t i) { return *slots_[i]; }
  const EndpointState& at(std::size_t i) const { return *slots_[i]; }

  // The slot of `address`, or -1.
  int find(const std::string& address) const;
  // Adds an endpoint, or revives a removed one with that address (which
  // keeps the config it was first added with: readers may be looking at
  // it). Returns the slot, or -1 when the pool is full. Data-layer thread
  // only.
  int add(const config::EndpointConfig& c, const boost::asio::ip::tcp::endpoint& resolved);
  // Marks the endpoint removed: never chosen again, in-flight requests finish.
  void remove(std::size_t slot) { slots_[slot]->removed.store(true, std::memory_order_relaxed); }

  // Passive health: one failure of endpoint `slot` (any I/O thread). At
  // `policy.consecutive_failures` in a row the endpoint is ejected for
  // base_time x 2^k (k: ejections since its last success), at most
  // max_time; when the ejection ends it is tried again, and one more failure
  // ejects it again (longer) while one success clears the streak. The last
  // usable endpoint is never ejected (Envoy's max_ejection_percent and
  // panic threshold): a pool with nothing usable could only answer 503,
  // and would not notice a recovery before the backoff ends. Best effort
  // across threads: two endpoints failing at the same instant may both go.
  FailureVerdict record_failure(std::size_t slot, Clock::time_point now,
                                const EjectionPolicy& policy,
                                std::chrono::nanoseconds* backoff = nullptr);

 private:
  std::unique_ptr<std::unique_ptr<EndpointState>[]> slots_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace sluice::datalayer
