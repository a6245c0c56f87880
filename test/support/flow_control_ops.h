// A flow controller driven by a stream of bytes, against a model of what
// each request must get: for the fuzz target test/fuzz/fuzz_flow_control.cc
// and for FlowControlOps.* (a fixed set of random streams in `make test`).
//
// The bytes choose a configuration (fairness and ordering policy, bands,
// limits, TTLs, the no-endpoint TTL, slots, eviction in flight, headroom,
// a usage-limit policy, a fleet, the default scheduling profile) and then
// operations as the proxy makes them: enqueue (a few tenants and bands, own
// TTLs and deadlines), dispatch, complete, output tokens, cancel (queued,
// in flight or already answered), time passing with expiry, the pool
// emptying and filling, metrics scrapes, a reload of TTLs, policies and
// the scheduler (requests in flight under the old one), and the admin
// plane's changes (a tenant's weight, pin or queue limit; bands added,
// changed, removed) and, in a fleet, the other replicas' state. After
// every operation:
//   - each request has had at most one answer while queued (dispatched,
//     rejected or evicted), and once dispatched only kEvictedPreempted;
//   - a decision names a request that was queued (or in flight, for a
//     preemption), never an unknown or answered one;
//   - the controller's queued count is the model's.
// At the end the pool gets room and the queue is drained: every request
// must have had its answer. run_flow_control_ops returns "" or the first
// violation.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"
#include "flowcontrol/usage_limit_policies.h"
#include "scheduling/from_config.h"

namespace sluice::testing {

class ByteStream {
 public:
  ByteStream(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  std::uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  // A value in [0, n).
  unsigned pick(unsigned n) { return n == 0 ? 0 : next() % n; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// What a stream reached: the answers given, by outcome, and the
// operations run (for a test to check that its streams reach every state).
struct OpsCoverage {
  std::array<std::uint64_t, kQueueOutcomeCount> outcomes{};
  std::uint64_t operations = 0;
};

inline std::string run_flow_control_ops(const std::uint8_t* data, std::size_t size,
                                        OpsCoverage* coverage = nullptr) {
  using namespace std::chrono_literals;
  using sluice::QueueOutcome;
  ByteStream in(data, size);
  static const char* const kFairness[] = {"global-strict-fairness-policy", "vtc-fairness-policy",
                                          "round-robin-fairness-policy"};
  static const char* const kOrdering[] = {"fcfs-ordering-policy", "edf-ordering-policy",
                                          "slo-deadline-ordering-policy"};
  auto ttl_of = [](unsigned v) -> std::optional<flowcontrol::Duration> {
    if (v == 0) return std::nullopt;
    return std::chrono::milliseconds(500) * v;
  };

  auto config = [&] {
    flowcontrol::ControllerConfig c;
    c.registry.default_band.fairness = kFairness[in.pick(3)];
    c.registry.default_band.ordering = kOrdering[in.pick(3)];
    if (in.pick(2)) {
      registry::BandConfig high = c.registry.template_for(1);
      high.fairness = kFairness[in.pick(3)];
      high.ordering = kOrdering[in.pick(3)];
      high.max_requests = in.pick(6);  // 0: unlimited
      c.registry.bands.push_back(high);
    }
    if (in.pick(2)) {
      registry::BandConfig low = c.registry.template_for(-1);
      low.share = in.pick(2) ? 0.2 : 0;
      c.registry.bands.push_back(low);
    }
    c.registry.max_requests = in.pick(12);  // 0: unlimited
    c.registry.max_bytes = in.pick(3) == 0 ? 200 : 0;
    c.registry.max_flows = in.pick(8);
    c.displacement = in.pick(2) ? "lowest-band-newest-first" : "none";
    c.default_ttl = ttl_of(in.pick(6));
    c.no_endpoint_ttl_set = in.pick(2) != 0;
    if (c.no_endpoint_ttl_set) c.no_endpoint_ttl = ttl_of(in.pick(8));
    c.flow_idle_timeout = std::chrono::seconds(1 + in.pick(3));
    return c;
  };

  flowcontrol::ControllerConfig cfg = config();
  cfg.eviction.enabled = in.pick(3) == 0;
  const std::uint64_t slots = 1 + in.pick(3);
  if (in.pick(3) == 0) {  // headroom for the top band: a reserve, lent when idle
    cfg.headroom.enabled = true;
    cfg.headroom.protected_priority = static_cast<int>(in.pick(2));
    // As config validation requires: below the detector's slots (else the
    // lower bands never run).
    cfg.headroom.reserve = in.pick(static_cast<unsigned>(slots));
    cfg.headroom.lend = in.pick(2) != 0;
    cfg.headroom.over_admission = in.pick(2);
    cfg.headroom.reserve_endpoints = in.pick(2);
  }
  const unsigned usage_limit = in.pick(4);  // none, static, holdback, soft
  const bool fleet = in.pick(3) == 0;       // a replica of a fleet (fleet_view.h)
  const bool scheduled = in.pick(2) != 0;   // the default profile, not least-in-flight
  auto scheduler = [] {
    return scheduling::build_scheduler(config::load_config_string("{}\n", "ops"));
  };

  enum class State { kQueued, kInFlight, kPreempted, kDone };
  struct Request {
    State state = State::kQueued;
    std::uint64_t ticket = 0;
  };
  std::map<std::uint64_t, Request> requests;  // by cookie
  std::string violation;
  auto fail = [&](std::string what) {
    if (violation.empty()) violation = std::move(what);
  };
  auto name = [](std::uint64_t cookie) { return "request " + std::to_string(cookie); };
  std::uint64_t enqueuing = 0;  // the cookie enqueue() is deciding, if any
  // While a cancel runs: the one request it may answer (0: none at all).
  bool cancelling = false;
  std::uint64_t cancel_may_answer = 0;

  flowcontrol::Controller c(
      cfg,
      std::make_unique<flowcontrol::ConcurrencyDetector>(
          flowcontrol::ConcurrencyParams{false, slots, 1000000, 0}),
      [&](const flowcontrol::Decision& d) {
        if (coverage) coverage->outcomes[static_cast<std::size_t>(d.outcome)] += 1;
        auto it = requests.find(d.cookie);
        if (it == requests.end()) return fail("a decision for an unknown " + name(d.cookie));
        Request& r = it->second;
        if (cancelling &&
            (d.cookie != cancel_may_answer || d.outcome != QueueOutcome::kEvictedContextCancelled))
          return fail("a cancel answered " + name(d.cookie) + ", not the request cancelled");
        if (d.outcome == QueueOutcome::kEvictedPreempted) {
          if (r.state != State::kInFlight)
            return fail(name(d.cookie) + " preempted while not in flight");
          r.state = State::kPreempted;
          return;
        }
        if (r.state != State::kQueued) return fail(name(d.cookie) + " answered twice");
        if (d.ticket != 0) {
          if (r.ticket != 0 && r.ticket != d.ticket)
            return fail(name(d.cookie) + " decided under another ticket");
          r.ticket = d.ticket;
        }
        if (d.outcome == QueueOutcome::kDispatched) {
          if (d.cookie == enqueuing) return fail(name(d.cookie) + " dispatched inside enqueue");
          r.state = State::kInFlight;
        } else {
          r.state = State::kDone;
        }
      });

  if (scheduled) c.set_scheduler(scheduler());
  if (fleet) {
    flowcontrol::FleetSettings f;
    f.enabled = true;
    f.fairness_slack = 10.0 * in.pick(40);
    f.max_hold = std::chrono::milliseconds(50) * in.pick(6);
    c.set_fleet(f);
  }
  if (usage_limit == 1)
    c.set_usage_limit_policy(std::make_unique<flowcontrol::StaticUsageLimitPolicy>(0.5));
  if (usage_limit == 2)
    c.set_usage_limit_policy(std::make_unique<flowcontrol::PriorityHoldbackPolicy>(
        0.3, 0.9, flowcontrol::PriorityHoldbackPolicy::Domain::kRank));
  if (usage_limit == 3)
    c.set_usage_limit_policy(std::make_unique<flowcontrol::SoftReflectiveCeilingPolicy>());
  std::vector<flowcontrol::EndpointIdentity> pool(2);
  pool[0].address = "127.0.0.1:1";
  pool[1].address = "127.0.0.1:2";
  c.set_endpoints({pool[0]});
  unsigned endpoints = 1;
  flowcontrol::TimePoint now{};
  std::uint64_t next_cookie = 1;

  auto count = [&](State s) {
    std::size_t n = 0;
    for (const auto& [cookie, r] : requests) n += r.state == s;
    return n;
  };
  // The n-th request (modulo) in one of `states`, or 0.
  auto nth = [&](unsigned n, std::initializer_list<State> states) -> std::uint64_t {
    std::vector<std::uint64_t> found;
    for (const auto& [cookie, r] : requests)
      for (State s : states)
        if (r.state == s && r.ticket != 0) found.push_back(cookie);
    return found.empty() ? 0 : found[n % found.size()];
  };
  auto finish = [&](std::uint64_t cookie) {
    Request& r = requests[cookie];
    c.complete(r.ticket, in.pick(50), now);
    r.state = State::kDone;
  };

  for (int step = 0; step < 4000 && !in.empty() && violation.empty(); ++step) {
    if (coverage) coverage->operations += 1;
    switch (in.pick(fleet ? 15 : 14)) {
      case 0:
      case 1:
      case 2: {  // a request arrives
        flowcontrol::EnqueueRequest r;
        r.cookie = next_cookie++;
        r.flow_id = "tenant-" + std::to_string(in.pick(5));
        r.priority = static_cast<int>(in.pick(3)) - 1;
        r.received = now;
        r.ttl = ttl_of(in.pick(8));
        if (in.pick(4) == 0) r.slo_ttft = std::chrono::milliseconds(100) * (1 + in.pick(20));
        r.bytes = 10 + in.pick(60);
        r.input_tokens = in.pick(100);
        r.max_output_tokens = in.pick(100);
        requests[r.cookie] = Request{};
        enqueuing = r.cookie;
        const std::uint64_t ticket = c.enqueue(r, now);
        enqueuing = 0;
        Request& m = requests[r.cookie];
        if (ticket == 0) {
          if (m.state != State::kDone) fail(name(r.cookie) + " got ticket 0 but no answer");
        } else {
          if (m.state == State::kDone) fail(name(r.cookie) + " answered and given a ticket");
          m.ticket = ticket;
        }
        break;
      }
      case 3:
        c.dispatch(now);
        break;
      case 4:  // a dispatched request ends
        if (std::uint64_t k = nth(in.next(), {State::kInFlight, State::kPreempted})) finish(k);
        break;
      case 5:  // output tokens of one in flight
        if (std::uint64_t k = nth(in.next(), {State::kInFlight}))
          c.report_output_tokens(requests[k].ticket, in.pick(200));
        break;
      case 6: {  // a client goes away: queued, in flight, or already answered
        std::uint64_t k = nth(in.next(), {State::kQueued, State::kInFlight, State::kDone});
        if (!k) break;
        const bool queued = requests[k].state == State::kQueued;
        cancelling = true;
        cancel_may_answer = queued ? k : 0;
        c.cancel(requests[k].ticket, now);
        cancelling = false;
        if (queued && requests[k].state != State::kDone)
          fail("a cancel left " + name(k) + " queued");
        break;
      }
      case 7:  // time passes
        now += std::chrono::milliseconds(50) * in.pick(40);
        c.expire(now);
        break;
      case 8: {  // the pool changes: empty, one, two endpoints; or a scrape
        const unsigned n = in.pick(4);
        if (n < 3) {
          endpoints = n;
          c.set_endpoints(
              std::vector<flowcontrol::EndpointIdentity>(pool.begin(), pool.begin() + n));
        } else if (endpoints > 0) {
          flowcontrol::EndpointMetrics m;
          m.waiting_queue_size = in.pick(8);
          m.running_requests_size = in.pick(32);
          m.kv_cache_usage = in.pick(101) / 100.0;
          c.update_metrics(in.pick(endpoints), m, now);
        }
        break;
      }
      case 9: {  // a reload: new TTLs, policies, limits
        flowcontrol::ControllerReload reload;
        reload.config = config();
        reload.config.eviction = cfg.eviction;
        reload.config.headroom = cfg.headroom;
        reload.detector =
            std::make_unique<flowcontrol::ConcurrencyDetector>(flowcontrol::ConcurrencyParams{
                false, cfg.headroom.reserve + 1 + in.pick(3), 1000000, 0});
        // A new scheduler while requests are in flight under the old one.
        if (scheduled && in.pick(2)) reload.scheduler = scheduler();
        c.apply(std::move(reload), now);
        break;
      }
      case 10: {  // the admin plane: a tenant's weight, pin or queue limit
        registry::FlowOverride o;
        if (in.pick(2)) o.weight = 0.25 * (1 + in.pick(8));
        if (in.pick(2)) o.priority = static_cast<int>(in.pick(3)) - 1;
        if (in.pick(3) == 0) o.max_queued = in.pick(4);
        c.registry().set_flow_override("tenant-" + std::to_string(in.pick(5)), o, now);
        break;
      }
      case 11:
        c.registry().clear_flow_override("tenant-" + std::to_string(in.pick(5)), now);
        break;
      case 12: {  // the admin plane: a band added or changed
        registry::BandConfig b;
        b.priority = static_cast<int>(in.pick(3)) - 1;
        b.fairness = kFairness[in.pick(3)];
        b.ordering = kOrdering[in.pick(3)];
        b.max_requests = in.pick(6);
        b.share = in.pick(2) ? 0.3 : 0;
        c.registry().set_band(b, now);
        break;
      }
      case 13:  // the admin plane: a band removed (its requests stay)
        c.registry().remove_band(static_cast<int>(in.pick(3)) - 1, now);
        break;
      case 14: {  // the other replicas' state, as fleet_sync reads it
        // (finite, non-negative: it refuses other values)
        flowcontrol::FleetInbound f;
        for (const auto& e : pool)
          if (in.pick(2))
            f.endpoints.push_back(
                flowcontrol::FleetEndpointLoad{e.address, in.pick(4), in.pick(3), in.pick(500)});
        for (unsigned t = in.pick(4); t > 0; --t)
          f.service.emplace_back(
              flowcontrol::fleet_flow_key(static_cast<int>(in.pick(3)) - 1,
                                          "tenant-" + std::to_string(in.pick(5))),
              in.pick(2) ? 1.0 * in.pick(300) : 1e6 * in.pick(50));
        for (unsigned b = in.pick(3); b > 0; --b) {
          flowcontrol::FleetBandBacklog l;
          l.priority = static_cast<int>(in.pick(3)) - 1;
          l.has_counter = in.pick(2) != 0;
          l.min_counter = 100.0 * in.pick(100);
          l.queued = in.pick(10);
          l.queued_before = in.pick(l.queued + 1);
          f.backlog.push_back(l);
        }
        f.replicas = in.pick(4);
        f.rank = in.pick(f.replicas + 1);
        f.queued = in.pick(10);
        f.queued_before = in.pick(static_cast<unsigned>(f.queued) + 1);
        f.ready = in.pick(4) != 0;
        flowcontrol::FleetOutbound out;
        c.exchange_fleet(f, out, now);
        break;
      }
    }
    if (violation.empty() && c.queued() != count(State::kQueued))
      fail("the controller holds " + std::to_string(c.queued()) + " queued, the model " +
           std::to_string(count(State::kQueued)));
  }
  if (!violation.empty()) return violation;

  // Drain: room, every request in flight ends, until nothing is queued.
  // The other replicas (if any) have gone: nothing queued or held there.
  c.set_endpoints(pool);
  if (fleet) {
    flowcontrol::FleetOutbound out;
    c.exchange_fleet(flowcontrol::FleetInbound{}, out, now);
  }
  for (int round = 0; round < 10000 && count(State::kQueued) > 0; ++round) {
    now += 10ms;
    c.expire(now);
    c.dispatch(now);
    for (auto& [cookie, r] : requests)
      if (r.state == State::kInFlight || r.state == State::kPreempted) finish(cookie);
    if (!violation.empty()) return violation;
  }
  for (const auto& [cookie, r] : requests)
    if (r.state == State::kQueued) return name(cookie) + " never answered";
  if (c.queued() != 0) return "the controller still holds " + std::to_string(c.queued());
  return violation;
}

}  // namespace sluice::testing
