// A deterministic fake-clock simulator for flow control: the real
// Controller, registry and policies, scripted clients, and a simulated pool
// whose endpoints serve each request for a time that depends on its tokens.
// No threads, no sleeps: time is a number the event loop advances.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::sim {

using namespace flowcontrol;
using namespace std::chrono_literals;

struct SimRequest {
  std::string flow;
  int priority = 0;
  std::uint64_t input_tokens = 100;
  std::uint64_t output_tokens = 100;
  std::uint64_t bytes = 400;
  std::optional<Duration> ttl;
  // Poisson arrivals only: output length drawn uniformly from
  // [output_tokens - jitter, output_tokens + jitter].
  std::uint64_t output_jitter = 0;
};

struct Record {
  SimRequest request;
  TimePoint arrived;
  TimePoint decided;  // dispatch or final outcome
  TimePoint finished;
  std::optional<QueueOutcome> outcome;
  std::uint64_t ticket = 0;
  int endpoint = -1;
  std::uint32_t in_flight_after = 0;  // on its endpoint, itself included, when dispatched
  bool evicted = false;               // dispatched, then evicted in flight
  bool waited = false;                // Decision::waited of its dispatch
};

struct PoolModel {
  std::size_t endpoints = 1;
  std::uint64_t slots_per_endpoint = 4;  // concurrency-detector maxConcurrency
  Duration per_input_token = 10us;
  Duration per_output_token = 1ms;
  Duration fixed = 0ms;
};

class Sim {
 public:
  Sim(ControllerConfig config, PoolModel pool)
      : pool_(pool),
        controller_(std::move(config),
                    std::make_unique<ConcurrencyDetector>(
                        ConcurrencyParams{false, pool.slots_per_endpoint, 1000000, 0}),
                    [this](const Decision& d) { on_decision(d); }) {
    controller_.set_endpoint_count(pool.endpoints);
  }

  TimePoint now() const { return now_; }
  Controller& controller() { return controller_; }

  // Schedules `fn` at `at`.
  void at(TimePoint at, std::function<void()> fn) { events_.push({at, ++seq_, std::move(fn)}); }

  // A request arrives now: enqueued, then whatever can go is dispatched.
  std::size_t arrive(const SimRequest& r) {
    std::size_t id = records_.size();
    records_.push_back(Record{r, now_, {}, {}, std::nullopt, 0, -1});
    EnqueueRequest e;
    e.cookie = id;
    e.flow_id = r.flow;
    e.priority = r.priority;
    e.received = now_;
    e.ttl = r.ttl;
    e.bytes = r.bytes;
    e.input_tokens = r.input_tokens;
    e.max_output_tokens = r.output_tokens;
    records_[id].ticket = controller_.enqueue(e, now_);
    controller_.dispatch(now_);
    return id;
  }

  void cancel(std::size_t id) {
    controller_.cancel(records_[id].ticket, now_);
    controller_.dispatch(now_);
  }

  // Runs events (and TTL expiries, at their deadlines) until `end`.
  void run_until(TimePoint end) {
    while (true) {
      auto next_event = events_.empty() ? TimePoint::max() : events_.top().at;
      auto next_deadline = controller_.next_deadline().value_or(TimePoint::max());
      auto next = std::min(next_event, next_deadline);
      if (next > end) break;
      now_ = next;
      if (next_deadline <= next_event) {
        controller_.expire(now_);
        controller_.dispatch(now_);
        continue;
      }
      auto ev = events_.top();
      events_.pop();
      ev.fn();
    }
    now_ = end;
  }
  void run_for(Duration d) { run_until(now_ + d); }

  // A closed-loop client keeping `depth` requests of `r` queued or in service
  // from `start` until `stop`.
  void backlog(const SimRequest& r, int depth, TimePoint start, TimePoint stop) {
    at(start, [=, this] {
      for (int i = 0; i < depth; ++i) arrive_closed_loop(r, stop);
    });
  }

  // Poisson arrivals of `r` at `rate` per second in [start, stop).
  void poisson(const SimRequest& r, double rate, TimePoint start, TimePoint stop,
               std::uint64_t seed) {
    auto rng = std::make_shared<std::mt19937_64>(seed);
    schedule_poisson(r, rate, start, stop, rng);
  }

  // How long an evicted request takes to stop (the session closing its
  // upstream connection) before its completion confirms the eviction.
  Duration eviction_confirm_delay = 1ms;

  const std::vector<Record>& records() const { return records_; }
  std::vector<Record>& records() { return records_; }

 private:
  struct Event {
    TimePoint at;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator<(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void arrive_closed_loop(const SimRequest& r, TimePoint stop) {
    std::size_t id = arrive(r);
    closed_loop_[id] = stop;
  }

  void schedule_poisson(const SimRequest& r, double rate, TimePoint t, TimePoint stop,
                        std::shared_ptr<std::mt19937_64> rng) {
    std::exponential_distribution<double> gap(rate);
    auto next = t + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(gap(*rng)));
    if (next >= stop) return;
    at(next, [=, this] {
      SimRequest drawn = r;
      if (r.output_jitter) {
        std::uniform_int_distribution<std::uint64_t> len(r.output_tokens - r.output_jitter,
                                                         r.output_tokens + r.output_jitter);
        drawn.output_tokens = len(*rng);
      }
      arrive(drawn);
      schedule_poisson(r, rate, next, stop, rng);
    });
  }

  void on_decision(const Decision& d) {
    auto& rec = records_[d.cookie];
    if (d.outcome == QueueOutcome::kEvictedPreempted) {
      rec.evicted = true;
      rec.outcome = d.outcome;
      const std::uint64_t ticket = d.ticket;
      const std::size_t id = d.cookie;
      at(now_ + eviction_confirm_delay, [=, this] {
        records_[id].finished = now_;
        controller_.complete(ticket, 0, now_);
        refill(id);
        controller_.dispatch(now_);
      });
      return;
    }
    rec.decided = now_;
    rec.outcome = d.outcome;
    if (d.outcome != QueueOutcome::kDispatched) {
      refill(d.cookie);
      return;
    }
    rec.endpoint = d.endpoint;
    rec.waited = d.waited;
    rec.in_flight_after =
        controller_.endpoint_load()[static_cast<std::size_t>(d.endpoint)].in_flight;
    Duration service = pool_.fixed +
                       pool_.per_input_token * static_cast<long>(rec.request.input_tokens) +
                       pool_.per_output_token * static_cast<long>(rec.request.output_tokens);
    const std::uint64_t ticket = d.ticket;
    const std::size_t id = d.cookie;
    at(now_ + service, [=, this] {
      if (records_[id].evicted) return;  // stopped early; its completion was sent then
      records_[id].finished = now_;
      controller_.complete(ticket, records_[id].request.output_tokens, now_);
      refill(id);
      controller_.dispatch(now_);
    });
  }

  // A closed-loop client replaces a request that left the queue.
  void refill(std::size_t id) {
    auto it = closed_loop_.find(id);
    if (it == closed_loop_.end()) return;
    TimePoint stop = it->second;
    closed_loop_.erase(it);
    if (now_ < stop) {
      SimRequest r = records_[id].request;
      at(now_, [=, this] { arrive_closed_loop(r, stop); });
    }
  }

  PoolModel pool_;
  Controller controller_;
  TimePoint now_{};
  std::uint64_t seq_ = 0;
  std::priority_queue<Event> events_;
  std::vector<Record> records_;
  std::map<std::size_t, TimePoint> closed_loop_;
};

// A band of `priority` with round-robin fairness.
inline registry::BandConfig rr_band(int priority) {
  registry::BandConfig b;
  b.priority = priority;
  b.fairness = "round-robin-fairness-policy";
  return b;
}

inline ControllerConfig config_with(std::string fairness,
                                    std::vector<registry::BandConfig> bands = {}) {
  ControllerConfig c;
  c.registry.default_band.fairness = std::move(fairness);
  for (auto& b : bands) c.registry.bands.push_back(b);
  return c;
}

// Max-min fair allocation of `capacity` among `demands` (water filling).
inline std::vector<double> max_min_fair(double capacity, const std::vector<double>& demands) {
  std::vector<double> alloc(demands.size(), 0);
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < demands.size(); ++i) open.push_back(i);
  double left = capacity;
  while (!open.empty() && left > 1e-12) {
    double share = left / static_cast<double>(open.size());
    std::vector<std::size_t> still;
    for (auto i : open) {
      double want = demands[i] - alloc[i];
      if (want <= share) {
        alloc[i] += want;
        left -= want;
      } else {
        still.push_back(i);
      }
    }
    if (still.size() == open.size()) {
      for (auto i : still) alloc[i] += share;
      left = 0;
    }
    open = std::move(still);
  }
  return alloc;
}

}  // namespace sluice::sim
