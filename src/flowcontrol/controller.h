// The flow controller: admission, queueing, expiry, displacement and
// saturation-gated dispatch, as a plain single-threaded class.
//
// It is driven by events (enqueue, cancel, complete, metrics, time) with an
// explicit `now`, and reports every decision through the Sink exactly once
// per request. The dispatcher thread (controller_shell) feeds it from
// lock-free queues; the simulator in test/sim/ drives it on a fake clock.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flowcontrol/fairness_policies.h"
#include "registry/flow_registry.h"
#include "sluice/flowcontrol/outcome.h"
#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

struct ControllerConfig {
  registry::RegistryConfig registry;
  std::optional<Duration> default_ttl;  // none: requests wait until dispatched or cancelled
  // Make room under a global limit by evicting strictly lower-priority queued
  // requests, chosen by this policy; "none": GIE's reject-the-newcomer.
  std::string displacement = "lowest-band-newest-first";
  Duration flow_idle_timeout = std::chrono::minutes(5);
  FairnessParams fairness;
};

struct EnqueueRequest {
  std::uint64_t cookie = 0;  // returned in the Decision
  std::string flow_id = "default-flow";
  int priority = 0;
  TimePoint received{};
  std::optional<Duration> ttl;       // the request's own TTL (header / objective)
  std::optional<Duration> slo_ttft;  // x-slo-ttft-ms
  std::uint64_t bytes = 0;
  std::uint64_t input_tokens = 0;
  std::uint64_t max_output_tokens = 0;
};

struct Decision {
  std::uint64_t cookie = 0;
  std::uint64_t ticket = 0;  // identifies a dispatched request to complete()
  QueueOutcome outcome = QueueOutcome::kRejectedOther;
  int endpoint = -1;         // Dispatched only
};

struct EndpointMetrics {
  double waiting = 0;
  double running = 0;
  double kv_cache_usage = 0;
};

class Controller {
 public:
  using Sink = std::function<void(const Decision&)>;
  // Picks an endpoint for `request` among those with room (has_room[i]);
  // -1 if none suits. The default takes the fewest in flight.
  using Router = std::function<int(const QueuedRequest& request, const std::vector<EndpointLoad>& load,
                                   const std::vector<bool>& has_room)>;

  Controller(ControllerConfig config, std::unique_ptr<SaturationDetector> detector, Sink sink,
             Router router = {});

  // Queues a request, or decides it at once (rejection). Returns its ticket
  // (0 if it was decided at once).
  std::uint64_t enqueue(const EnqueueRequest& request, TimePoint now);
  // The client went away: a queued request ends EvictedContextCancelled. A
  // dispatched one is left to complete().
  void cancel(std::uint64_t ticket, TimePoint now);
  // Output tokens produced so far by a dispatched request (charged to its
  // flow's fairness as they stream).
  void report_output_tokens(std::uint64_t ticket, std::uint64_t total_output_tokens);
  // A dispatched request finished (any way): frees its in-flight credit.
  void complete(std::uint64_t ticket, std::uint64_t total_output_tokens, TimePoint now);

  void set_endpoint_count(std::size_t n);
  void update_metrics(std::size_t endpoint, const EndpointMetrics& m, TimePoint now);

  // Finalizes requests whose TTL has passed and collects idle flows.
  void expire(TimePoint now);
  // Releases requests while an endpoint has room; returns how many.
  std::size_t dispatch(TimePoint now);
  // The next TTL deadline, to wake up for.
  std::optional<TimePoint> next_deadline() const;
  // Every queued request ends EvictedOther.
  void shutdown(TimePoint now);

  // Replaces the displacement policy (a plugin; null: none).
  void set_displacement_policy(std::unique_ptr<DisplacementPolicy> p) { displacement_ = std::move(p); }
  // Replaces the decision sink (the shell installs its own).
  void set_sink(Sink sink) { sink_ = std::move(sink); }

  registry::FlowRegistry& registry() { return registry_; }
  const std::vector<EndpointLoad>& endpoint_load() const { return load_; }
  double pool_saturation(TimePoint now) const { return detector_->saturation(load_, now); }
  std::size_t queued() const { return registry_.total_requests(); }

 private:
  void finalize(registry::Item* item, QueueOutcome outcome, TimePoint now);
  bool displace(int priority, std::uint64_t bytes, TimePoint now);
  registry::Band* choose_band();
  void account_dispatch(registry::Band* chosen, bool used_share);
  int route(const QueuedRequest& request, TimePoint now);
  // Deadline heap (min-heap on request.deadline, positions kept in items).
  void heap_push(registry::Item* item);
  void heap_remove(registry::Item* item);
  void heap_sift_up(std::size_t i);
  void heap_sift_down(std::size_t i);
  void heap_swap(std::size_t a, std::size_t b);

  ControllerConfig config_;
  std::unique_ptr<SaturationDetector> detector_;
  Sink sink_;
  Router router_;
  registry::FlowRegistry registry_;
  std::unique_ptr<DisplacementPolicy> displacement_;  // null: none
  std::vector<EndpointLoad> load_;
  std::vector<bool> room_;
  std::vector<registry::Item*> deadlines_;
  std::uint64_t sequence_ = 0;
  std::uint32_t rotation_ = 0;
  TimePoint last_gc_{};
  registry::Band* starving_ = nullptr;  // band chosen by its share in choose_band()
};

}  // namespace sluice::flowcontrol
