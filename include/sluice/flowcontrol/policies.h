// Policy interfaces of flow control. All are called on the dispatcher thread
// only (single writer); they must not block and must not throw.
//
//   OrderingPolicy      which request of a flow goes first
//   FairnessPolicy      which flow of a band goes next (one instance per band)
//   DisplacementPolicy  which queued requests make room for a newcomer (the
//                       controller guarantees only lower priority goes)
//   SaturationDetector  whether the pool can take another request now
//   UsageLimitPolicy    how full the pool may be for each band to dispatch
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/flowcontrol/types.h"

namespace sluice::flowcontrol {

class OrderingPolicy {
 public:
  virtual ~OrderingPolicy() = default;
  virtual std::string_view type() const = 0;
  // Strict weak order: true when `a` should be dispatched before `b`.
  virtual bool before(const QueuedRequest& a, const QueuedRequest& b) const = 0;
  // True if arrival order is dispatch order, so a FIFO list suffices.
  virtual bool is_fifo() const { return false; }
  // A number that orders requests as before() does (before(a, b) exactly
  // when order_key(a) < order_key(b)), for policies that have one
  // (has_order_key()): a fairness policy can then copy it into a flat
  // structure instead of reading each request it compares.
  virtual bool has_order_key() const { return false; }
  virtual std::int64_t order_key(const QueuedRequest& r) const { return 0; }
};

// A read-only view of one flow of a band, for fairness policies.
class FlowView {
 public:
  virtual ~FlowView() = default;
  virtual const FlowKey& key() const = 0;
  virtual double weight() const = 0;
  virtual std::size_t queued() const = 0;
  // The flow's next request by the band's ordering policy; null when empty.
  virtual const QueuedRequest* head() const = 0;
  // A dense index, stable while the flow exists (reused after it is
  // collected): policies keep per-flow state in vectors indexed by it.
  virtual std::uint32_t slot() const = 0;
};

// program-aware-fairness's parameters (llm-d's names and defaults, in
// seconds as llm-d's; max_programs is sluice's hard bound on its table).
struct ProgramAwareParams {
  double weight_service = 0.8;          // lasWeightService
  double weight_head_wait = 0.2;        // lasWeightHeadWait
  double half_life_seconds = 60;        // lasHalfLifeSeconds; 0: no decay
  double eviction_ttl_seconds = 3600;   // evictionTtlSeconds; 0: no eviction
  double eviction_sweep_seconds = 300;  // evictionSweepSeconds
  std::uint32_t max_programs = 10000;   // maxPrograms (sluice)
  bool operator==(const ProgramAwareParams&) const = default;
};

// A fairness policy's parameters (vtc-fairness-policy's token prices,
// program-aware-fairness's).
struct FairnessParams {
  double input_price = 1.0;
  double output_price = 2.0;
  ProgramAwareParams program_aware;
  bool operator==(const FairnessParams&) const = default;
};

class FairnessPolicy {
 public:
  virtual ~FairnessPolicy() = default;
  virtual std::string_view type() const = 0;
  // The band's ordering policy: set before any flow event, and again when
  // the order of queued requests may have changed (an operator changed the
  // ordering, or a new TTL regime changed queued deadlines in place).
  // Policies that compare heads use it, and must then order their
  // backlogged flows again, keeping every one of them: no flow is
  // announced again afterwards.
  virtual void set_ordering(const OrderingPolicy* ordering) {}
  // A flow of the band went from empty to non-empty.
  virtual void on_backlogged(FlowView& flow) = 0;
  // A backlogged flow became empty (dispatch, cancellation, expiry, move).
  virtual void on_idle(FlowView& flow) = 0;
  // A backlogged flow's head changed without it becoming empty or
  // backlogged (an earlier request arrived, the head was removed).
  virtual void on_head_changed(FlowView& flow) {}
  // The backlogged flow to serve next; null only if none is backlogged.
  // Must cost O(log F) or better.
  virtual FlowView* pick() = 0;
  // For prefetching only: up to `max` flows likely to be picked next, best
  // first, as if each pick were served and never picked again; returns how
  // many it wrote. A guess that costs no more than the top of the policy's
  // structure: callers use it to start loading what those picks will
  // read, never to decide. Policies without a cheap guess write none.
  virtual std::size_t upcoming(FlowView** out, std::size_t max) { return 0; }
  // `request` of `flow` was dispatched (charge input work here).
  virtual void on_dispatched(FlowView& flow, const QueuedRequest& request) {}
  // Output tokens were produced for `flow` (charge output work here). The
  // flow may be idle by now.
  virtual void on_output_tokens(FlowView& flow, std::uint64_t tokens) {}
  // A request of `flow` dispatched earlier has finished (after its last
  // on_output_tokens). The flow may be idle by now.
  virtual void on_completed(FlowView& flow) {}
  // The flow is about to be destroyed (it is idle).
  virtual void on_removed(FlowView& flow) {}

  // A fleet (redis:): other replicas gave `flow` this much priced service
  // (tokens x price, before weights): charge it as if it were served here.
  virtual void on_fleet_service(FlowView& flow, double service) {}
  // A flow's standing that compares across replicas (VTC: its counter);
  // none: the policy has none, and the fleet's holds do not apply to it.
  virtual std::optional<double> fleet_standing(const FlowView& flow) const { return std::nullopt; }
  // The smallest standing among the band's backlogged flows.
  virtual std::optional<double> fleet_backlog_min() const { return std::nullopt; }
  // The smallest standing backlogged in the band on another replica (none:
  // none is): a flow that becomes backlogged here starts no lower.
  virtual void set_fleet_floor(std::optional<double> floor) {}
};

// What displacement may look at: the queued requests of bands below a
// priority. Implemented by the controller over the registry.
class DisplacementView {
 public:
  virtual ~DisplacementView() = default;
  // Calls `visit(request, band priority)` for queued requests of bands with a
  // priority strictly below `below`: lowest band first, newest first within
  // a band; stops when `visit` returns false.
  virtual void for_each_lower(
      int below, const std::function<bool(const QueuedRequest&, int priority)>& visit) const = 0;
};

class DisplacementPolicy {
 public:
  virtual ~DisplacementPolicy() = default;
  virtual std::string_view type() const = 0;
  // A newcomer at `priority` needs `need_requests` and `need_bytes` freed
  // under the pool's limits. Returns the ids (QueuedRequest::id) to evict,
  // or nothing. The controller evicts them only if every one is queued below
  // `priority` and together they free enough; otherwise it evicts nothing
  // and rejects the newcomer.
  virtual std::vector<std::uint64_t> choose(const DisplacementView& view, int priority,
                                            std::uint64_t need_requests,
                                            std::uint64_t need_bytes) = 0;
};

// Per-endpoint load as the saturation detector sees it: the last scraped
// metrics plus the requests sluice dispatched since (in-flight credit).
struct EndpointLoad {
  bool has_metrics = false;
  TimePoint metrics_time;
  double waiting = 0;  // queued on the model server
  double running = 0;
  double kv_cache_usage = 0;    // 0..1
  std::uint32_t in_flight = 0;  // sluice's requests on it now
  std::uint32_t dispatched_since_scrape = 0;
  std::uint64_t in_flight_tokens = 0;  // input + max output of those
};

// The load an endpoint shows to a band allowed `k` requests past the
// detector's limit (flowControl.headroom.overAdmission): as if `k` fewer
// were there — in flight, then sent since the scrape, then waiting on the
// server. The dispatcher and the I/O thread's check of its choice both use it.
inline void over_admit(EndpointLoad& l, std::uint32_t k) {
  l.in_flight -= std::min(l.in_flight, k);
  const std::uint32_t from_sent = std::min(l.dispatched_since_scrape, k);
  l.dispatched_since_scrape -= from_sent;
  l.waiting = std::max(0.0, l.waiting - static_cast<double>(k - from_sent));
}

class SaturationDetector {
 public:
  virtual ~SaturationDetector() = default;
  virtual std::string_view type() const = 0;
  // True when endpoint `e` can take one more request at `now`.
  virtual bool has_room(const EndpointLoad& e, TimePoint now) const = 0;
  // has_room() of every endpoint of `pool` into `room` (the same size), as
  // 1 or 0: what the dispatcher asks before each decision. One virtual call
  // for the pool; a detector overrides it with a loop the compiler can see
  // through (at 512 endpoints the call per endpoint was a fifth of a
  // decision).
  virtual void has_room_each(std::span<const EndpointLoad> pool, TimePoint now,
                             std::span<std::uint8_t> room) const {
    for (std::size_t i = 0; i < pool.size(); ++i) room[i] = has_room(pool[i], now) ? 1 : 0;
  }
  // Pool saturation in [0, 1+] for metrics: 1 means no endpoint has room.
  virtual double saturation(const std::vector<EndpointLoad>& pool, TimePoint now) const = 0;
};

// One dispatch ceiling per band from the pool's saturation (llm-d's
// UsageLimitPolicy, same contract): a band is dispatched from only while the
// saturation is below its ceiling, so lower bands can be held back before
// the pool is full and the room left goes to the bands above them.
class UsageLimitPolicy {
 public:
  virtual ~UsageLimitPolicy() = default;
  virtual std::string_view type() const = 0;
  // Called once per dispatch decision, at `now`. `saturation` is the detector's pool
  // saturation (0 empty, 1 full); `priorities` every band the registry has,
  // highest first, empty ones included; `ceilings` has one entry per band,
  // pre-filled with 1.0 (an entry left alone is no limit beyond the
  // detector's). Ceilings are in [0, 1] and should not increase from a band
  // to the next lower one; sluice does not depend on it: each band is held
  // by its own ceiling only, so a higher band held back never blocks a
  // lower one that its ceiling lets through (llm-d stops at the first band
  // held back, which starves lower bands when ceilings are not monotonic).
  virtual void compute(TimePoint now, double saturation, std::span<const int> priorities,
                       std::span<double> ceilings) = 0;
};

}  // namespace sluice::flowcontrol
