// The flow controller: admission, queueing, expiry, displacement and
// saturation-gated dispatch, as a plain single-threaded class.
//
// It is driven by events (enqueue, cancel, complete, metrics, time) with an
// explicit `now`, and reports every decision through the Sink exactly once
// per request. The dispatcher thread (controller_shell) feeds it from
// lock-free queues; the simulator in test/sim/ drives it on a fake clock.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "flowcontrol/fairness_policies.h"
#include "flowcontrol/fleet_view.h"
#include "flowcontrol/latency_histogram.h"
#include "registry/flow_registry.h"
#include "scheduling/scheduler.h"
#include "sluice/flowcontrol/admitter.h"
#include "sluice/flowcontrol/outcome.h"
#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

// Room kept for the protected bands (priority >= protected_priority): a
// lower band's request is placed only where the detector would still have
// room after `reserve` more requests (and `reserve_tokens` more tokens) —
// per endpoint, or with pool_scope anywhere in the pool — unless `lend`,
// no protected request waits and none arrived for `lend_after_idle` (the
// reserve is lent while the protected bands are idle, and reclaimed as
// completions free slots once they are back). The top band may go
// `over_admission` requests past the detector's limit on an endpoint.
// `reserve_endpoints` keeps whole endpoints for the protected bands.
struct HeadroomConfig {
  bool enabled = false;
  int protected_priority = 0;
  std::uint32_t reserve = 0;
  std::uint64_t reserve_tokens = 0;
  bool pool_scope = false;
  bool lend = true;
  Duration lend_after_idle = std::chrono::seconds(1);
  std::uint32_t over_admission = 0;
  // The last `reserve_endpoints` endpoints in the pool (never all of them)
  // take no lower-band request while the reserve is held: a protected
  // request lands on an engine that runs none of the flood's work, so it
  // does not wait for a step of theirs. Lent and reclaimed like the rest.
  std::uint32_t reserve_endpoints = 0;
};

// In-flight eviction (llm-d's enableEviction, with sluice's extensions):
// when a band's head request finds no room, the newest dispatched request
// of the lowest evictable band below it is evicted, one at a time, the next
// only once the last is confirmed (its completion) and `grace` has passed.
struct EvictionConfig {
  bool enabled = false;
  std::vector<int> priorities;  // evictable bands (all below 0); empty: every band below 0
  Duration wait_budget{};       // only for a head that waited at least this long
  Duration grace = std::chrono::milliseconds(10);
  Duration confirmation_timeout = std::chrono::seconds(10);
};

struct ControllerConfig {
  registry::RegistryConfig registry;
  HeadroomConfig headroom;
  EvictionConfig eviction;
  std::optional<Duration> default_ttl;  // none: requests wait until dispatched or cancelled
  // llm-d's noEndpointRequestTTL: the TTL that applies while no endpoint is
  // in the pool (all removed). Unset: default_ttl applies there too; set to
  // none (the config's 0): no expiry while the pool is empty. A request's
  // own TTL applies in both regimes. Deadlines are re-evaluated (from the
  // enqueue time) when the pool empties or fills again, and a request that
  // expires while the pool is empty ends rejected-no-endpoints (503).
  bool no_endpoint_ttl_set = false;
  std::optional<Duration> no_endpoint_ttl;
  // Make room under a global limit by evicting strictly lower-priority queued
  // requests, chosen by this policy; "none": GIE's reject-the-newcomer.
  std::string displacement = "lowest-band-newest-first";
  Duration flow_idle_timeout = std::chrono::minutes(5);
  FairnessParams fairness;
};

struct EnqueueRequest {
  std::uint64_t cookie = 0;  // returned in the Decision
  std::string flow_id = "default-flow";
  // registry::FlowTable::hash(flow_id), if the caller computed it (the I/O
  // thread does, so the one writer does not).
  std::optional<std::uint64_t> flow_hash;
  int priority = 0;
  TimePoint received{};
  std::optional<Duration> ttl;       // the request's own TTL (header / objective)
  std::optional<Duration> slo_ttft;  // x-slo-ttft-ms
  std::uint64_t bytes = 0;
  std::uint64_t input_tokens = 0;
  std::uint64_t max_output_tokens = 0;
  std::shared_ptr<const scheduling::Request> scheduling;
};

struct Decision {
  std::uint64_t cookie = 0;
  std::uint64_t ticket = 0;  // identifies a dispatched request to complete()
  QueueOutcome outcome = QueueOutcome::kRejectedOther;
  int endpoint = -1;  // Dispatched only
  // Dispatched: where to go if `endpoint` refuses the connection, in order.
  std::array<std::int32_t, 3> fallbacks{-1, -1, -1};
  // Dispatched: header lines ("name: value\r\n") the scheduler adds to the
  // request towards the endpoint (e.g. x-prefiller-host-port) and to the
  // response towards the client (e.g. x-session-token).
  std::string request_headers;
  std::string response_headers;
  // Dispatched: the scheduler's SchedulingResult::upstream_port (0: the
  // endpoint's own port) and rank_header (empty: none), for every attempt.
  std::uint16_t upstream_port = 0;
  std::string_view rank_header;
  // Dispatched: the I/O thread tells the dispatcher when the response's
  // first body bytes arrive (a plugin of the scheduler acts on them).
  bool notify_started = false;
  // Rejected by the scheduler: why (for the log and the error body).
  std::string detail;
  // Dispatched past the detector's limit by headroom.overAdmission: the
  // allowance the I/O thread's room check applies too.
  std::uint32_t over_admission = 0;
  // Dispatched while the headroom's reserve is held against this request's
  // band (per endpoint): the I/O thread's check of a fallback endpoint
  // keeps the same room free and stays off the reserved endpoints (the
  // pool's last `held_endpoints` in it).
  std::uint32_t held_reserve = 0;
  std::uint64_t held_reserve_tokens = 0;
  std::uint32_t held_endpoints = 0;
  // Dispatched after waiting in the queue: admitted in an earlier pass than
  // the one that released it (the I/O thread looks whether such a
  // request's client is still there before sending it on).
  bool waited = false;
};

// A scrape's result: the scheduler's Metrics (update_time is set by the
// controller when it applies them).
using EndpointMetrics = scheduling::Metrics;

// Who an endpoint is, for the scheduler (its slot is its index).
struct EndpointIdentity {
  std::string address;
  std::string engine = "vllm";
  scheduling::Labels labels;
  bool removed = false;  // gone from the pool: never chosen, in-flight finish
};

// Time spent queued, by flow, priority and how the wait ended (GIE's
// inference_extension_flow_control_request_queue_duration_seconds).
struct QueueDurationSeries {
  std::string fairness_id;  // "other" once max_flows distinct ids have series
  int priority = 0;
  QueueOutcome outcome = QueueOutcome::kDispatched;
  LatencyHistogram histogram;
};

// What a config reload changes in a running controller (see apply()).
struct ControllerReload {
  ControllerConfig config;
  std::unordered_map<std::string, double> weights;  // the config's flows:
  std::unique_ptr<SaturationDetector> detector;
  std::unique_ptr<scheduling::Scheduler> scheduler;  // null: keep the running one
  std::unique_ptr<UsageLimitPolicy> usage_limit;     // null: none
  std::vector<std::unique_ptr<Admitter>> admitters;  // replace the running ones
  Duration staleness = std::chrono::milliseconds(200);
};

class Controller {
 public:
  using Sink = std::function<void(const Decision&)>;

  // Without a scheduler (set_scheduler), a request goes to the endpoint
  // with room that has the fewest in flight.
  Controller(ControllerConfig config, std::unique_ptr<SaturationDetector> detector, Sink sink);
  ~Controller();

  // Queues a request, or decides it at once (rejection). Returns its ticket
  // (0 if it was decided at once).
  std::uint64_t enqueue(const EnqueueRequest& request, TimePoint now);

  // Runs handle(i) for i in [0, n) -- a pass over a batch of events --
  // having first started loading what the enqueues among the next few will
  // read: with tens of thousands of flows, an enqueue's flow-table slot, its
  // flow and the flow's tail are cache misses, each waiting on the one
  // before; started a few events ahead, those of several enqueues overlap.
  // `request_at(j)` is event j's EnqueueRequest, or null for another kind.
  // Only loads: a guess that turns out wrong (a pinned id, a new flow)
  // costs the load and nothing else.
  // Below kPrefetchFlows flows everything is in cache and the hints would
  // only cost (measured: 9-14% fewer decisions/s at 1,000 flows).
  static constexpr std::size_t kPrefetchFlows = 4096;
  // At most this many of a band's upcoming picks are prefetched per pass
  // (see dispatch()); on by default, off for an A/B measurement or a test
  // that a pass decides the same either way.
  static constexpr std::size_t kPrefetchPicks = 32;
  void set_release_prefetch(bool on) { release_prefetch_ = on; }
  template <class RequestAt, class Handle>
  void for_each_prefetched(std::size_t n, RequestAt&& request_at, Handle&& handle) {
    if (registry_.flow_count() < kPrefetchFlows) {
      for (std::size_t i = 0; i < n; ++i) handle(i);
      return;
    }
    // Slot, flow, tail: 16/8/4 events ahead measured 5% more decisions/s
    // than 8/4/2 at 50 000 flows once the whole flow is loaded (6 pinned
    // interleaved rounds; 12/6/3 in between).
    constexpr std::size_t kAhead[] = {16, 8, 4};
    auto hint = [&](std::size_t j, int stage) {
      if (j < n)
        if (const EnqueueRequest* r = request_at(j)) prefetch_enqueue(*r, stage);
    };
    for (int stage = 0; stage < 3; ++stage)
      for (std::size_t j = 0; j < kAhead[stage]; ++j) hint(j, stage);
    for (std::size_t i = 0; i < n; ++i) {
      for (int stage = 0; stage < 3; ++stage) hint(i + kAhead[stage], stage);
      handle(i);
    }
  }
  // One stage of the above: 0 the flow-table slot, 1 the flow found there,
  // 2 the flow's tail item.
  void prefetch_enqueue(const EnqueueRequest& request, int stage) const;
  // The client went away: a queued request ends EvictedContextCancelled. A
  // dispatched one is left to complete().
  void cancel(std::uint64_t ticket, TimePoint now);
  // Output tokens produced so far by a dispatched request (charged to its
  // flow's fairness as they stream).
  void report_output_tokens(std::uint64_t ticket, std::uint64_t total_output_tokens);
  // A dispatched request finished (any way): frees its in-flight credit.
  void complete(std::uint64_t ticket, std::uint64_t total_output_tokens, TimePoint now);
  // The response's first body bytes arrived: the scheduler's lifecycle
  // plugins hear it (inflight-load-producer releases prompt tokens).
  void response_started(std::uint64_t ticket);

  void set_endpoint_count(std::size_t n);
  // Sets the pool (slot i = endpoint i). Slots only grow; a removed
  // endpoint keeps its slot (its in-flight requests finish) and is never
  // chosen again; an address that comes back gets its old slot.
  void set_endpoints(const std::vector<EndpointIdentity>& endpoints);
  // The profile-based scheduler; runs once per dispatched request.
  void set_scheduler(std::unique_ptr<scheduling::Scheduler> s);
  scheduling::Scheduler* scheduler() { return scheduler_.get(); }
  // Gate off (GIE without flow control): every request is dispatched at
  // once to the scheduler's choice, whatever the detector says.
  void set_gated(bool gated);
  // Metrics older than this make an endpoint stale for the scheduler.
  void set_staleness_threshold(Duration d) { staleness_ = d; }
  void update_metrics(std::size_t endpoint, const EndpointMetrics& m, TimePoint now);

  // Finalizes requests whose TTL has passed and collects idle flows.
  void expire(TimePoint now);
  // Releases requests while an endpoint has room; returns how many.
  std::size_t dispatch(TimePoint now);
  // The next TTL deadline, to wake up for.
  std::optional<TimePoint> next_deadline() const;
  // Every queued request ends EvictedOther.
  void shutdown(TimePoint now);

  // A reloaded config, applied in place: limits, bands and their policies,
  // weights, TTL, displacement, detector and (if given) the scheduler.
  // Queued requests keep their place; in-flight requests complete against
  // the scheduler that placed them (kept until its last one completes).
  void apply(ControllerReload reload, TimePoint now);

  // Queue-duration series; ids beyond `max_flows` distinct ones fold into "other".
  void set_metrics_max_flows(std::size_t n) {
    if (n != max_metric_flows_) ++series_epoch_;  // flows' cached series are looked up again
    max_metric_flows_ = n;
  }
  const std::vector<QueueDurationSeries>& queue_durations() const { return queue_durations_; }

  // Replaces the displacement policy (a plugin; null: none).
  void set_displacement_policy(std::unique_ptr<DisplacementPolicy> p) {
    displacement_ = std::move(p);
  }
  // Per-band dispatch ceilings (null: none, the detector alone decides).
  // Only with the gate on.
  void set_usage_limit_policy(std::unique_ptr<UsageLimitPolicy> p) { usage_limit_ = std::move(p); }
  // Admitters (plugins: of kind admitter) asked, in order, about each
  // arriving request before it is queued: the first that refuses answers
  // rejected-capacity.
  void set_admitters(std::vector<std::unique_ptr<Admitter>> a) { admitters_ = std::move(a); }
  // The ceilings and pool saturation of the last dispatch decision, by
  // band priority (highest first); empty without a usage-limit policy.
  struct BandCeiling {
    int priority;
    double ceiling;
  };
  const std::vector<BandCeiling>& band_ceilings() const { return last_ceilings_; }
  double last_saturation() const { return saturation_; }
  // Times a backlogged band was passed over because the pool's saturation
  // had reached its ceiling.
  std::uint64_t ceiling_holds() const { return ceiling_holds_; }
  // Times a lower band's request waited because the headroom's reserve
  // was held for a protected band.
  std::uint64_t headroom_holds() const { return headroom_holds_; }
  bool eviction_enabled() const { return config_.eviction.enabled; }
  struct EvictionStats {
    std::uint64_t issued = 0;     // evictions sent
    std::uint64_t confirmed = 0;  // their completions seen
    std::uint64_t timed_out = 0;  // given up waiting for (counted as confirmed)
  };
  const EvictionStats& eviction_stats() const { return eviction_stats_; }

  // A fleet of replicas (redis:): the other replicas' work counts against
  // each endpoint's room, their service against each flow's fairness, and
  // a flow ahead of one backlogged elsewhere waits (fleet_view.h).
  void set_fleet(const FleetSettings& settings) { fleet_ = settings; }
  const FleetSettings& fleet() const { return fleet_; }
  // Applies the other replicas' state (replacing the last) and hands out
  // this replica's own. With `in` empty: local accounting only.
  void exchange_fleet(const FleetInbound& in, FleetOutbound& out, TimePoint now);

  // Replaces the decision sink (the shell installs its own).
  void set_sink(Sink sink) { sink_ = std::move(sink); }

  registry::FlowRegistry& registry() { return registry_; }
  const FairnessParams& fairness_prices() const { return config_.fairness; }
  const std::vector<EndpointLoad>& endpoint_load() const { return load_; }
  double pool_saturation(TimePoint now) const { return detector_->saturation(load_, now); }
  std::size_t queued() const { return registry_.total_requests(); }

 private:
  void finalize(registry::Item* item, QueueOutcome outcome, TimePoint now, std::string detail = {});
  // The queue-duration series of (id, priority, outcome): its own while
  // fewer than max_metric_flows_ ids have one, else "other"'s.
  std::size_t series_index(const std::string& id, int priority, QueueOutcome outcome);
  // The series of `flow`'s dispatches (cached on the flow).
  std::uint32_t dispatched_series(registry::Flow& flow);
  // dispatch(): starts loading the releases `band`'s policy expects next.
  void prefetch_upcoming(registry::Band& band);
  void record_queue_time(const std::string& id, int priority, QueueOutcome outcome,
                         Duration waited);
  scheduling::Scheduler* scheduler_for(const registry::Item* item);
  bool displace(int priority, std::uint64_t bytes, TimePoint now);
  // A full band admits a newcomer in place of the newest requests of its
  // longest flow (queued / weight), if that flow stays longer than the
  // newcomer's: a flood cannot crowd the other flows out of the band.
  bool displace_in_band(registry::Flow& newcomer, std::uint64_t bytes, TimePoint now);
  // `shares`: a lower band whose anti-starvation share is due may be
  // chosen (false once such a band found no room in this pass).
  registry::Band* choose_band(TimePoint now, bool shares);
  // The pool's saturation over the endpoints still in it; the usage-limit
  // policy's ceilings for every band into ceilings_.
  double pool_saturation_now(TimePoint now);
  void compute_ceilings(TimePoint now);
  void account_dispatch(registry::Band* chosen, bool used_share);
  // The endpoint for `item` (filling `decision`), or kWait (no room now)
  // or kUnroutable (the scheduler can never place it).
  static constexpr int kWait = -1;
  static constexpr int kUnroutable = -2;
  static constexpr int kFleetHold = -3;  // room, but another replica's flow is behind
  bool fleet_hold(registry::Item* item, TimePoint now);
  void charge_fleet(const registry::Flow& flow, double service);
  int route(registry::Item* item, TimePoint now, Decision& decision);
  // Whether endpoint i has room for a request of band `priority` (the
  // detector, with the headroom's reserve or over-admission applied).
  enum class Allowance { kPlain, kReserveHeld, kOverAdmit };
  Allowance allowance_for(int priority, TimePoint now) const;
  bool has_room(std::size_t i, Allowance a, TimePoint now) const;
  // Requests endpoint i could still take, at most `cap`.
  std::uint64_t room_on(std::size_t i, std::uint64_t cap, TimePoint now) const;
  // Requests the pool could still take, at most `cap`.
  std::uint64_t pool_free(std::uint64_t cap, TimePoint now) const;
  void refresh_endpoint_view(TimePoint now);
  // exchange_fleet's steps, in order (controller.cc). The demand the room
  // is cut by, in the highest band backlogged anywhere: this replica's as
  // last published, the others', and that of those ranked before it.
  struct FleetDemand {
    std::uint64_t mine = 0, others_queued = 0, before = 0;
  };
  void take_remote_load(const FleetInbound& in);
  FleetDemand read_fleet_backlog(const FleetInbound& in);
  void hold_room_for_others(const FleetInbound& in, const FleetDemand& demand, TimePoint now);
  void hold_reserve(const std::vector<std::uint64_t>& room, std::uint64_t total,
                    std::uint64_t reserve, std::uint32_t rank);
  void publish_own_load(FleetOutbound& out);
  void take_fleet_service(const FleetInbound& in);
  void publish_fleet_state(FleetOutbound& out);
  // Deadline heap (min-heap on request.deadline, positions kept in items).
  void heap_push(registry::Item* item);
  void heap_remove(registry::Item* item);
  // The TTL that applies now to a request of `band` whose own TTL is `own`:
  // the shorter of its own and the regime's (the band's defaultRequestTTL,
  // else the default, while the pool has endpoints; else noEndpointRequestTTL).
  std::optional<Duration> effective_ttl(const std::optional<Duration>& own,
                                        const registry::BandConfig& band) const;
  void reevaluate_deadlines();
  void heap_sift_up(std::size_t i);
  void heap_sift_down(std::size_t i);
  void heap_swap(std::size_t a, std::size_t b);

  ControllerConfig config_;
  std::unique_ptr<SaturationDetector> detector_;
  Sink sink_;
  std::unique_ptr<scheduling::Scheduler> scheduler_;
  std::vector<scheduling::Endpoint> view_;  // the scheduler's view, slot = index
  std::uint64_t labels_versions_ = 0;       // the last Endpoint::labels_version handed out
  std::vector<std::uint8_t> removed_;       // per endpoint slot, 1: gone from the pool
  scheduling::SchedulingResult result_;     // reused
  bool gated_ = true;
  bool pool_empty_ = false;  // every endpoint removed (noEndpointRequestTTL's regime)
  Duration staleness_ = std::chrono::milliseconds(200);
  registry::FlowRegistry registry_;
  std::unique_ptr<DisplacementPolicy> displacement_;  // null: none
  std::unique_ptr<UsageLimitPolicy> usage_limit_;     // null: none
  std::vector<std::unique_ptr<Admitter>> admitters_;
  std::vector<int> band_priorities_;  // scratch, highest first
  std::vector<double> ceilings_;      // scratch, same order
  std::vector<BandCeiling> last_ceilings_;
  std::vector<EndpointLoad> active_load_;  // scratch: load_ without removed endpoints
  double saturation_ = 0;
  std::uint64_t ceiling_holds_ = 0;
  std::uint64_t headroom_holds_ = 0;
  std::optional<TimePoint> last_protected_arrival_;
  // Eviction: in-flight requests of evictable bands, by band (lowest
  // first), each list oldest dispatch .. newest.
  struct EvictList {
    registry::Item* head = nullptr;
    registry::Item* tail = nullptr;
  };
  std::map<int, EvictList> evictable_;
  std::uint32_t revocations_pending_ = 0;
  TimePoint revocation_sent_{};
  TimePoint eviction_quiet_until_{};
  std::optional<TimePoint> eviction_check_at_;  // wake then to look again
  EvictionStats eviction_stats_;
  bool evictable_band(int priority) const;
  // A request dispatched from an evictable band joins that band's list of
  // requests in flight (newest last), where eviction looks for its victim.
  void track_evictable(registry::Item* item, int priority);
  void evict_list_remove(registry::Item* item);
  // `head`, of `band`, found no room: evict for it if allowed now.
  void maybe_evict(registry::Band& band, registry::Item* head, TimePoint now);
  std::vector<EndpointLoad> load_;  // with a fleet: the other replicas' work included
  std::vector<std::uint8_t> room_;  // per endpoint, 1: has room for this decision
  // Fleet: the other replicas' work by slot (folded into load_), their
  // smallest backlogged standing by band, this replica's service since the
  // last exchange by flow key, and the hold of a band whose flow is ahead.
  FleetSettings fleet_;
  struct RemoteLoad {
    std::uint32_t in_flight = 0;
    std::uint32_t dispatched = 0;
    std::uint64_t tokens = 0;
  };
  std::vector<RemoteLoad> remote_;
  // Room left to the others at the last view: what they may have taken
  // since the state they reported (a replica reports before it dispatches).
  std::vector<std::uint32_t> fleet_left_;
  std::map<int, FleetBandBacklog> fleet_backlog_;
  // This replica's queued requests per band as last published: the others
  // cut the room with these numbers, so this replica cuts with them too.
  std::map<int, std::uint64_t> fleet_published_;
  std::unordered_map<std::string, double> fleet_service_;
  std::optional<TimePoint> fleet_hold_since_;
  int fleet_hold_band_ = 0;
  // band -> the backlog (counter, queued) given up on after max_hold
  std::map<int, std::pair<double, std::uint64_t>> fleet_stuck_;
  bool fleet_ready_ = false;     // a first view came (FleetInbound::ready)
  bool fleet_held_now_ = false;  // this dispatch() pass held a band
  std::uint64_t fleet_holds_ = 0;
  std::uint64_t fleet_overrides_ = 0;
  std::vector<registry::Item*> deadlines_;
  std::uint64_t sequence_ = 0;
  std::size_t last_released_ = 0;  // by the last dispatch pass (how far to prefetch)
  bool release_prefetch_ = true;
  std::uint32_t rotation_ = 0;
  TimePoint last_gc_{};
  registry::Band* starving_ = nullptr;  // band chosen by its share in choose_band()
  // Schedulers replaced by a reload while requests they placed are in
  // flight: kept until those complete (their cycle state is keyed by them).
  struct Retired {
    std::uint32_t epoch;
    std::unique_ptr<scheduling::Scheduler> scheduler;
    std::size_t in_flight;
  };
  std::vector<Retired> retired_;
  std::unique_ptr<scheduling::Scheduler> retired_last_;  // freed at the next retirement's end
  std::uint32_t scheduler_epoch_ = 0;
  std::size_t scheduler_in_flight_ = 0;
  // Queue durations.
  std::vector<QueueDurationSeries> queue_durations_;
  std::unordered_map<std::string, std::size_t> queue_duration_index_;  // "id\0priority\0outcome"
  std::unordered_map<std::string, bool> metric_flows_;                 // ids with their own series
  std::size_t max_metric_flows_ = 100;
  std::uint32_t series_epoch_ = 1;  // Flow::SeriesCache entries of another epoch are stale
  std::string key_scratch_;
};

}  // namespace sluice::flowcontrol
