// One I/O thread: its single-threaded io_context (an implicit strand for
// each of its connections), its upstream pool, its share of the request
// statistics, and its queue towards the dispatcher. Everything here is
// touched only by that thread, but for deliver().
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flowcontrol/controller_shell.h"
#include "observe/request_stats.h"
#include "protocol/proxy_parsers.h"
#include "proxy/deferred_watch.h"
#include "proxy/hinted_reads.h"
#include "proxy/proxy_context.h"
#include "proxy/upstream_pool.h"

namespace sluice::proxy {

class HttpSession;

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

}  // namespace sluice::proxy
