// One I/O thread: its single-threaded io_context (an implicit strand for
// each of its connections), its upstream pool, its share of the request
// statistics, its queue towards the dispatcher and its working buffers.
// Everything here is touched only by that thread, but for deliver(); its
// connections reach it through the named operations below.
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

class ClientConnection;

class IoThread {
 public:
  IoThread(std::size_t index, ProxyContext& ctx, std::uint64_t id_prefix);
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return ioc_; }

  // ---- Its connections.
  using Registration = std::list<ClientConnection*>::iterator;
  Registration add(ClientConnection& c) { return connections_.insert(connections_.end(), &c); }
  void remove(Registration r) { connections_.erase(r); }
  // `fn` for each connection (a copy of the list: fn may end one).
  template <typename Fn>
  void for_each_connection(Fn fn) {
    std::vector<ClientConnection*> live(connections_.begin(), connections_.end());
    for (auto* c : live) fn(*c);
  }

  // ---- The request side.
  // A request id: 32 hex digits, unique to this process run.
  void new_request_id(std::string& out);
  const RequestPolicy& policy() const { return *policy_; }
  void set_policy(std::shared_ptr<const RequestPolicy> p) { policy_ = std::move(p); }
  const auth::Authenticator& authenticator() const { return *authenticator_; }
  // A new authenticator (keys, JWKS or config changed): the tokens verified
  // against the old one are forgotten.
  void set_authenticator(std::shared_ptr<const auth::Authenticator> a) {
    authenticator_ = std::move(a);
    token_cache_.clear();
  }
  auth::TokenCache* token_cache() { return &token_cache_; }
  // A large body buffer of a finished request, if the thread keeps one
  // (swapped into `body`, whose small buffer goes); false if none.
  bool take_spare_body(std::string& body);
  // `body`'s large buffer, kept for the thread's next large body (at most
  // kSpareBodies, each of at most kSpareBodyCapacity) or freed.
  void give_back_body(std::string& body);
  static constexpr std::size_t kSpareBodies = 4;
  static constexpr std::size_t kSpareBodyCapacity = protocol::kKeptBodyCapacity;
  observe::ThreadStats& stats() { return stats_; }
  std::string& log_scratch() { return log_scratch_; }  // the access-log line being formatted

  // ---- Flow control, through this thread's queue token.
  // An id for a request towards the dispatcher.
  std::uint64_t next_cookie() { return (static_cast<std::uint64_t>(index_) << 48) | ++cookie_seq_; }
  void enqueue(std::uint64_t cookie, flowcontrol::EnqueueRequest e,
               std::shared_ptr<flowcontrol::Waiter> waiter);
  void cancel(std::uint64_t cookie);
  void complete(std::uint64_t ticket, std::uint64_t output_tokens);
  void report_output_tokens(std::uint64_t ticket, std::uint64_t output_tokens);
  void response_started(std::uint64_t ticket);
  // Wakes the dispatcher once for everything this thread pushed during the
  // current pass of its event loop (the flush runs after the handlers that
  // the same epoll round made ready). Called on this thread only.
  void wake_dispatcher();
  // After a request was enqueued, instead of wake_dispatcher().
  void request_admitted();
  // Decisions for this thread's connections: the dispatcher appends, this
  // thread drains; one post per batch, not one per decision. Any thread.
  void deliver(std::shared_ptr<ClientConnection> connection, const flowcontrol::Decision& d);

  // ---- Client watches armed late (proxy/deferred_watch.h).
  // A tick: a request still open 10 to 20 ms after it was admitted gets
  // its client watch then.
  static constexpr std::chrono::milliseconds kWatchTick{10};
  // Enrolls a connection's request for a client watch armed one to two
  // ticks from now (if it is still open then).
  void defer_watch(ClientConnection& c);
  void forget_watch(ClientConnection& c);

  // ---- The upstream side.
  UpstreamPool& pool() { return pool_; }
  // Tie-break for the endpoint picker.
  std::uint32_t& rotation() { return rotation_; }
  // The relay's working buffers, shared by the thread's connections so that
  // what each relayed read touches stays in cache (a read's body is parsed
  // into relay_body, swapped into the exchange while its write is pending;
  // a write is framed in relay_out and copied to the exchange only for the
  // part the socket did not take at once).
  std::string& relay_body() { return relay_body_; }
  std::string& relay_out() { return relay_out_; }
  // `conn`'s read just completed short in the middle of a framed body: its
  // next read waits for readiness (reactor_hint.h) unless the endpoint's
  // close was seen already, and the hinted reads watch for that close.
  // Called in the read's completion, before anything else runs here.
  void hint_read(UpstreamConnection& conn);

  // ---- Lifecycle (the data plane's).
  // Sweeps the pool once a second (server.upstreamPoolIdleTimeout,
  // endpoints that left) until shutdown.
  void start_pool_sweep(ProxyContext& ctx);
  // At shutdown: the sweep stops, pooled connections close, hinted reads
  // are re-armed and their watch closed (its wait would keep the loop
  // running).
  void stop_upstreams();
  void close_pool() { pool_.close_all(); }

  // This thread hosts the inline dispatcher (server.dispatcher inline). A
  // pass's decisions for this thread's connections are acted on when the
  // pass ends, in the same handler, not by a drain posted behind
  // everything the loop queued meanwhile; and a request admitted after
  // kEarlyPassAfter others since the last pass runs the pass at once
  // rather than waiting for the one posted behind the rest of the loop's
  // round. Both bound how long the first request read in a busy round
  // waits for the round's last (its tail latency), at the cost of smaller
  // batches.
  static constexpr std::uint32_t kEarlyPassAfter = 16;
  void host_inline_dispatcher() { inline_.host = true; }
  void begin_inline_pass() {
    inline_.in_pass = true;
    inline_.admitted_since_pass = 0;
  }
  void end_inline_pass() {
    inline_.in_pass = false;
    drain_inbox();
  }

 private:
  struct Delivery {
    std::shared_ptr<ClientConnection> connection;
    flowcontrol::Decision decision;
  };
  void drain_inbox();
  void start_watch_tick();
  bool arm_close_watch();
  void stop_hinting();
  void sweep_pool(ProxyContext& ctx);

  std::size_t index_;
  // Declared before ioc_: connections still owned by queued handlers
  // unlink themselves from this list when the io_context destroys those
  // handlers.
  std::list<ClientConnection*> connections_;
  // Requests whose client watch is armed late; before ioc_ for the same
  // reason.
  DeferredWatches deferred_watches_;
  // Upstream connections whose read waits for readiness mid-stream
  // (proxy/hinted_reads.h); before ioc_ for the same reason.
  HintedReads hinted_reads_;
  boost::asio::io_context ioc_;
  UpstreamPool pool_;  // after ioc_: its sockets must go before their io_context
  std::optional<boost::asio::steady_timer> pool_sweep_;
  // Ticks `deferred_watches_` while it is not empty.
  std::optional<boost::asio::steady_timer> watch_tick_;
  // Watches `hinted_reads_`'s descriptor (a dup of it) once a read was
  // hinted; closed at shutdown.
  std::optional<boost::asio::posix::stream_descriptor> close_watch_;
  std::uint32_t rotation_ = 0;
  std::string relay_body_;
  std::string relay_out_;
  std::vector<std::string> spare_bodies_;
  std::uint64_t request_seq_ = 0;  // for generated request ids
  std::uint64_t id_prefix_ = 0;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> producer_;  // this thread's queue token
  std::uint64_t cookie_seq_ = 0;
  flowcontrol::ControllerShell* shell_ = nullptr;
  std::shared_ptr<const RequestPolicy> policy_;               // replaced on this thread by reloads
  std::shared_ptr<const auth::Authenticator> authenticator_;  // replaced the same way
  auth::TokenCache token_cache_;  // JWTs verified on this thread (auth.jwt.cacheEntries)
  observe::ThreadStats stats_;    // this thread's requests, for /metrics
  std::string log_scratch_;
  bool wake_scheduled_ = false;
  bool watch_tick_pending_ = false;
  bool close_watch_armed_ = false;
  // The inline dispatcher's passes on this thread (this thread only).
  struct InlinePasses {
    bool host = false;      // this thread hosts the inline dispatcher
    bool in_pass = false;   // inside the inline pass itself
    bool draining = false;  // acting on decisions (drain_inbox)
    std::uint32_t admitted_since_pass = 0;
  } inline_;
  moodycamel::ConcurrentQueue<Delivery> inbox_;
  std::atomic<bool> drain_pending_{false};
};

}  // namespace sluice::proxy
