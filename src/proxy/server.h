// The sluice data-plane server: one acceptor, N I/O threads each running its
// own single-threaded io_context (an implicit strand per connection, no
// mutex), graceful shutdown with a deadline.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "datalayer/dns_watcher.h"
#include "datalayer/endpoint_set.h"
#include "datalayer/endpoints_watcher.h"
#include "datalayer/metrics_scraper.h"
#include "fleet/fleet_sync.h"
#include "flowcontrol/controller_shell.h"
#include "observe/access_log.h"
#include "observe/request_stats.h"
#include "protocol/proxy_parsers.h"
#include "proxy/body_budget.h"
#include "proxy/connection_limit.h"
#include "proxy/deferred_watch.h"
#include "proxy/hinted_reads.h"
#include "proxy/upstream_pool.h"

namespace sluice::proxy {

class HttpSession;

struct ObjectiveInfo {
  int priority = 0;
  std::optional<std::chrono::nanoseconds> ttl;
};

// What an I/O thread reads per request that a config reload can change.
// Immutable once built; each worker holds its own reference, replaced on
// its own thread (no lock, no shared write).
struct RequestPolicy {
  explicit RequestPolicy(const config::Config& c);
  std::unordered_map<std::string, ObjectiveInfo> objectives;
  // What the I/O thread computes for the scheduler (prefix hashing).
  scheduling::RequestPreparation preparation;
  // Without the gate, GIE's legacy admission: a sheddable request (priority
  // < 0) is rejected while no endpoint has room by this detector.
  std::unique_ptr<flowcontrol::SaturationDetector> legacy_detector;
  // With the gate, the same detector the dispatcher gates on, applied by the
  // I/O thread to the endpoint a dispatched request actually goes to (the
  // dispatcher does not see fallbacks, ejections or refused connections):
  // nothing is sent to an endpoint without room by sluice's own in-flight
  // count.
  std::unique_ptr<flowcontrol::SaturationDetector> room_detector;
};

// Read-mostly state shared by all I/O threads.
struct ProxyContext {
  explicit ProxyContext(const config::Config& c);
  // The startup config. Its server: section is what runs (a reload cannot
  // change it); the rest is replaced by reloads (see Server::reload).
  config::Config config;
  datalayer::EndpointSet endpoints;             // grows at runtime (endpoints file, reload)
  std::shared_ptr<const RequestPolicy> policy;  // the startup one; workers hold theirs
  // The dispatcher: flow control (featureGates: [flowControl]) and the
  // scheduler; without the gate it only schedules, dispatching at once.
  std::unique_ptr<flowcontrol::ControllerShell> flow_control;
  bool gated = false;  // featureGates: [flowControl]
  // metrics-data-source's `path` (GIE), where endpoints serve metrics.
  std::string metrics_path = "/metrics";
  // The data layer's scraper (its counters, for /metrics); set by bind().
  const datalayer::MetricsScraper* scraper = nullptr;
  bool pool_saturated(const flowcontrol::SaturationDetector& detector) const;
  std::atomic<bool> shutting_down{false};
  // Drain (admin) or shutdown: new inference requests are turned away (503
  // `draining`); what is queued and in flight finishes.
  std::atomic<bool> draining{false};
  // The fleet's sync thread (redis:); null without one. Set by start().
  std::unique_ptr<fleet::FleetSync> fleet;
  observe::AccessLog access_log;      // opened before start(); then read-only
  ConnectionLimit connections;        // server.maxConnections
  ConnectionLimit admin_connections;  // server.adminMaxConnections
  BodyBudget body_budget;             // server.maxBufferedBodyBytes
  // Requests proxied right now (inference and pass-through), all threads.
  std::size_t in_flight() const;
};

// What a reload did.
struct ReloadResult {
  bool ok = false;
  std::string error;                        // !ok: why nothing changed
  std::vector<std::string> applied;         // sections applied in place
  std::vector<std::string> restart_needed;  // changed, but only a restart applies them
};

// One I/O thread: everything here is touched only by that thread.
struct Worker {
  Worker(std::size_t index, ProxyContext& ctx)
      : index(index),
        ioc(1),
        pool(ctx.endpoints.size(), ctx.config.server.upstream_max_idle_per_endpoint),
        stats(ctx.config.server.metrics_max_flows) {
    producer = ctx.flow_control->make_producer();
    shell = ctx.flow_control.get();
    policy = ctx.policy;
  }

  std::size_t index;
  // Declared before ioc: sessions still owned by queued handlers unlink
  // themselves from this list when the io_context destroys those handlers.
  std::list<HttpSession*> sessions;
  // Requests whose client watch is armed late (proxy/deferred_watch.h);
  // before ioc for the same reason.
  DeferredWatches deferred_watches;
  // Upstream connections whose read waits for readiness mid-stream
  // (proxy/hinted_reads.h); before ioc for the same reason.
  HintedReads hinted_reads;
  boost::asio::io_context ioc;
  UpstreamPool pool;  // after ioc: its sockets must go before their io_context
  // Sweeps `pool` once a second (server.upstreamPoolIdleTimeout, endpoints
  // that left); cancelled at shutdown.
  std::optional<boost::asio::steady_timer> pool_sweep;
  // Ticks `deferred_watches` while it is not empty.
  std::optional<boost::asio::steady_timer> watch_tick;
  // Watches `hinted_reads`'s descriptor (a dup of it) once a read was
  // hinted; closed at shutdown.
  std::optional<boost::asio::posix::stream_descriptor> close_watch;
  std::uint32_t rotation = 0;  // tie-break for the endpoint picker
  // The relay's working buffers, shared by the thread's sessions so that
  // what each relayed read touches stays in cache (HttpSession: a read's
  // body is parsed into relay_body, swapped into the session while its
  // write is pending; a write is framed in relay_out and copied to the
  // session only for the part the socket did not take at once).
  std::string relay_body;
  std::string relay_out;
  // Request-body buffers of finished large requests, for the thread's next
  // ones (HttpSession::release_request_body): at most kSpareBodies, each
  // of at most kSpareBodyCapacity.
  static constexpr std::size_t kSpareBodies = 4;
  static constexpr std::size_t kSpareBodyCapacity = protocol::kKeptBodyCapacity;
  std::vector<std::string> spare_bodies;
  std::uint64_t request_seq = 0;  // for generated request ids
  std::uint64_t id_prefix = 0;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> producer;  // this thread's queue token
  std::uint64_t cookie_seq = 0;
  flowcontrol::ControllerShell* shell = nullptr;
  std::shared_ptr<const RequestPolicy> policy;  // replaced on this thread by reloads
  observe::WorkerStats stats;                   // this thread's requests, for /metrics
  std::string log_scratch;                      // the access-log line being formatted

  // Wakes the dispatcher once for everything this thread pushed during the
  // current pass of its event loop (the flush runs after the handlers that
  // the same epoll round made ready). Called on this thread only.
  void wake_dispatcher();

  // A tick of `deferred_watches`: a request still open 10 to 20 ms after it
  // was admitted gets its client watch then.
  static constexpr std::chrono::milliseconds kWatchTick{10};
  // Enrolls a session's request for a client watch armed one to two ticks
  // from now (if it is still open then).
  void defer_watch(HttpSession& session);

  // `conn`'s read just completed short in the middle of a framed body: its
  // next read waits for readiness (reactor_hint.h) unless the endpoint's
  // close was seen already, and `hinted_reads` watches for that close.
  // Called in the read's completion, before anything else runs on this
  // thread.
  void hint_read(UpstreamConnection& conn);
  // At shutdown: no more hints; hinted reads are re-armed, and the watch
  // closed (its wait would keep the loop running).
  void stop_hinting();

  // Decisions for this thread's sessions: the dispatcher appends, this
  // thread drains; one post per batch, not one per decision.
  struct Delivery {
    std::shared_ptr<HttpSession> session;
    flowcontrol::Decision decision;
  };
  void deliver(std::shared_ptr<HttpSession> session, const flowcontrol::Decision& d);  // any thread
  void drain_inbox();

  // This thread hosts the inline dispatcher (server.dispatcher inline). A
  // pass's decisions for this thread's sessions are acted on when the pass
  // ends, in the same handler, not by a drain posted behind everything the
  // loop queued meanwhile; and a request admitted after kEarlyPassAfter
  // others since the last pass runs the pass at once rather than waiting
  // for the one posted behind the rest of the loop's round. Both bound how
  // long the first request read in a busy round waits for the round's
  // last (its tail latency), at the cost of smaller batches.
  static constexpr std::uint32_t kEarlyPassAfter = 16;
  void host_inline_dispatcher() { inline_host_ = true; }
  void begin_inline_pass() {
    in_inline_pass_ = true;
    admitted_since_pass_ = 0;
  }
  void end_inline_pass() {
    in_inline_pass_ = false;
    drain_inbox();
  }
  // After a request was enqueued, instead of wake_dispatcher().
  void request_admitted();

 private:
  void start_watch_tick();
  bool arm_close_watch();
  bool wake_scheduled_ = false;
  bool watch_tick_pending_ = false;
  bool close_watch_armed_ = false;
  bool inline_host_ = false;     // this thread only, below too
  bool in_inline_pass_ = false;  // inside the inline pass itself
  bool draining_ = false;        // acting on decisions (drain_inbox)
  std::uint32_t admitted_since_pass_ = 0;
  moodycamel::ConcurrentQueue<Delivery> inbox_;
  std::atomic<bool> drain_pending_{false};
};

class Server {
 public:
  explicit Server(const config::Config& config);
  ~Server();

  // Resolves endpoints and binds the listener (throws on failure, at startup).
  // Returns the bound address, e.g. "127.0.0.1:40123".
  std::string bind(const std::string& listen);
  // Starts the I/O threads.
  void start();
  // Stops accepting, lets in-flight requests finish up to the grace period,
  // then closes what is left. Blocks until all I/O threads have exited.
  void shutdown();

  ProxyContext& context() { return ctx_; }

  // Re-reads the config file and applies what it changed in place: bands,
  // limits, policies, weights, TTL, objectives, detector, scheduling
  // profiles and plugins, endpoints. Queued and in-flight requests stay.
  // An invalid file changes nothing. `done` runs exactly once, on the
  // dispatcher thread (after the change applied) or on the caller's.
  // Any thread; reloads are serialized.
  void reload(std::function<void(ReloadResult)> done);

  // Every I/O thread's request statistics, merged; `done` runs on the
  // thread that contributed last. Any thread.
  void collect_stats(std::function<void(observe::WorkerStats)> done);

 private:
  void do_accept();
  void sweep_pool(Worker& w);  // on w's thread, once a second
  bool inline_dispatcher() const;

  ProxyContext ctx_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  // server.dispatcher inline: the first I/O thread's loop runs the passes.
  std::unique_ptr<flowcontrol::DispatchHost> dispatch_host_;
  std::size_t next_worker_ = 0;
  std::vector<std::thread> threads_;
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::optional<Guard>> guards_;
  // Applies an endpoints-file content (data-layer thread): new addresses
  // join, missing ones leave, the dispatcher learns the new pool.
  void apply_endpoints_file(const std::vector<config::EndpointConfig>& file);
  // Data-layer thread: makes the pool the config's endpoints plus the
  // file's (new addresses join, missing ones leave), tells the dispatcher.
  void reconcile_endpoints();
  void publish_endpoints();
  std::vector<config::EndpointConfig> static_endpoints_;  // data-layer thread
  std::vector<config::EndpointConfig> file_endpoints_;    // data-layer thread
  std::vector<config::EndpointConfig> dns_endpoints_;     // data-layer thread
  std::unique_ptr<datalayer::DnsWatcher> dns_;
  // Reloads: one at a time; the config that runs now.
  std::mutex reload_mu_;
  config::Config running_;
  std::shared_ptr<const RequestPolicy> running_policy_;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> reload_producer_;
  // Endpoint metrics for the dispatcher and the legacy detector.
  std::unique_ptr<flowcontrol::ControllerShell::Producer> scraper_producer_;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> data_producer_;   // pool changes
  std::unique_ptr<flowcontrol::ControllerShell::Producer> fleet_producer_;  // the sync thread's
  std::string bound_;  // the data plane's bound address (the fleet shows it)
  void start_fleet();
  std::unique_ptr<datalayer::MetricsScraper> scraper_;
  std::unique_ptr<datalayer::EndpointsWatcher> watcher_;
  std::mutex done_mu_;  // startup/shutdown only
  std::condition_variable done_cv_;
  std::size_t threads_done_ = 0;
};

}  // namespace sluice::proxy
