// The dispatcher thread: the only thread that touches the Controller (and so
// the registry and policies). Other threads talk to it through one lock-free
// queue (moodycamel ConcurrentQueue, a producer token per I/O thread, bulk
// dequeue) and get answers through their Waiter.
//
// Pushing an event does not wake the dispatcher; wake() does. A producer
// calls wake() after its events (an I/O thread once per pass of its event
// loop), so a burst of requests costs one wake-up, not one per request. The
// dispatcher sleeps until woken or until the next TTL deadline, drains the
// queue, expires what is due, then dispatches as many requests as the
// saturation detector allows. No fixed tick.
//
// Inline (start_inline): no thread of its own. The same passes run as tasks
// on a host's event loop — with one I/O thread, that thread's — so a request
// is queued, decided and answered on one thread without a switch, and the
// host is still the one writer of flow-control state. wake() posts one pass
// (at most one outstanding); the host's timer runs one at the next TTL
// deadline. Other threads (scraper, fleet sync, admin) push and wake as
// before.
#pragma once

#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flowcontrol/controller.h"

namespace sluice::flowcontrol {

// Receives the one decision for a request. deliver() runs on the dispatcher
// thread (inline: the host's, during a pass) and must only hand the decision
// over (e.g. post it to the connection's executor, or leave it for the host's
// after_pass()): no blocking, no calls back into the shell.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void deliver(const Decision& decision) = 0;
};

// The event loop an inline dispatcher runs on.
class DispatchHost {
 public:
  virtual ~DispatchHost() = default;
  // Runs `fn` on the host's thread, after what is already queued there. Any
  // thread.
  virtual void post(std::function<void()> fn) = 0;
  // Runs the shell's pass on the host's thread at `when`, unless a pass
  // already comes at or before it. Host thread only.
  virtual void arm(TimePoint when) = 0;
  // No pass any more (the shell stopped): the timer lets the loop end.
  virtual void disarm() = 0;
  virtual bool on_host_thread() const = 0;
  // Around each pass, on the host's thread: the host may take the pass's
  // decisions for its own connections directly (Waiter::deliver still only
  // hands them over) and act on them when the pass is over.
  virtual void before_pass() {}
  virtual void after_pass() {}
};

class ControllerShell {
 public:
  using Producer = moodycamel::ProducerToken;
  using ClockFn = std::function<TimePoint()>;

  ControllerShell(std::unique_ptr<Controller> controller, ClockFn clock = Clock::now);
  ~ControllerShell();

  void start();
  // Runs the dispatcher on `host` instead of a thread of its own; `host`
  // outlives stop().
  void start_inline(DispatchHost* host);
  bool is_inline() const { return host_ != nullptr; }
  // One pass: what run() does per wake-up. Inline only, on the host's thread
  // (its timer and wake() call this, and the proxy's I/O thread when a busy
  // loop round has admitted enough to run one early: IoThread::request_admitted).
  void pass();
  // Ends every queued request (EvictedOther), then stops the thread. A
  // request enqueued after the stop (an I/O thread that raced with it) gets
  // EvictedOther at once, on the enqueuing thread: none waits for ever.
  void stop();

  // One token per producing thread (I/O thread); tokens are not thread-safe.
  std::unique_ptr<Producer> make_producer() { return std::make_unique<Producer>(queue_); }

  // Wakes the dispatcher to handle what was pushed. Any thread.
  void wake() {
    if (!host_) return wake_.signal();
    if (!pass_posted_.exchange(true, std::memory_order_acq_rel))
      host_->post([this] {
        pass_posted_.store(false, std::memory_order_release);
        pass();
      });
  }

  // The calls below push an event; call wake() after them.
  // `cookie` is the caller's unique id for the request (to cancel it by).
  void enqueue(Producer& p, std::uint64_t cookie, EnqueueRequest request,
               std::shared_ptr<Waiter> waiter);
  void cancel(Producer& p, std::uint64_t cookie);
  void report_output_tokens(Producer& p, std::uint64_t ticket, std::uint64_t total);
  void complete(Producer& p, std::uint64_t ticket, std::uint64_t total_output_tokens);
  // The response's first body bytes arrived (no wake needed: nothing waits).
  void response_started(Producer& p, std::uint64_t ticket);
  // From the metrics scraper (its own producer).
  void update_metrics(Producer& p, std::size_t endpoint, const EndpointMetrics& m);
  // Runs `change` on the dispatcher thread (the single writer), e.g. the
  // registry's runtime updates from the admin plane, then `done` there too.
  // Ordered after the events `p` pushed before it (the queue orders events
  // per producer, not across producers). Wakes the dispatcher itself.
  void reconfigure(Producer& p, std::function<void(Controller&)> change,
                   std::function<void()> done = {});

  // Dispatcher statistics (for metrics): wake-ups and requests released.
  std::uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  std::uint64_t released() const { return released_.load(std::memory_order_relaxed); }
  // Requests queued (or pushed and not yet handled) as of the dispatcher's
  // last pass; for shutdown's wait, not exact between passes.
  std::size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // Events handled (enqueues, completions, ...): over wakeups(), the batch size.
  std::uint64_t events() const { return events_.load(std::memory_order_relaxed); }

 private:
  struct Event {
    enum class Kind : std::uint8_t {
      kEnqueue,
      kCancel,
      kOutput,
      kComplete,
      kStarted,
      kMetrics,
      kReconfigure,
      kStop
    };
    Kind kind = Kind::kStop;
    std::uint64_t id = 0;  // cookie (enqueue, cancel) or ticket (output, complete, started)
    std::uint64_t tokens = 0;
    std::size_t endpoint = 0;
    EndpointMetrics metrics;
    EnqueueRequest request;
    std::shared_ptr<Waiter> waiter;
    std::function<void(Controller&)> change;
    std::function<void()> done;
  };

  void push_simple(Producer& p, Event::Kind kind, std::uint64_t id, std::uint64_t tokens);
  void run();
  // Drains the queue, expires, dispatches; returns when the next pass is due
  // at the latest (a TTL deadline, else a second from now).
  TimePoint run_pass();
  // After the last pass: the controller's shutdown, what is queued ended.
  void finish();
  void handle(Event& e, TimePoint now);
  void on_decision(const Decision& d);
  // After the stop: empties the queue, ending each request EvictedOther.
  void reject_after_stop(std::size_t at_most = SIZE_MAX);

  std::unique_ptr<Controller> controller_;
  ClockFn clock_;
  moodycamel::ConcurrentQueue<Event> queue_;
  moodycamel::LightweightSemaphore wake_;
  std::thread thread_;
  DispatchHost* host_ = nullptr;  // inline: the loop the passes run on
  std::atomic<bool> pass_posted_{false};
  std::atomic<bool> finished_{false};
  std::vector<Event> batch_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stopped_{false};  // the thread has ended; nothing drains the queue
  std::mutex reject_mu_;              // reject_after_stop (cold: after the stop only)
  // Dispatcher-thread only: requests waiting for their decision, by cookie.
  struct Pending {
    std::shared_ptr<Waiter> waiter;
    std::uint64_t ticket = 0;
  };
  std::unordered_map<std::uint64_t, Pending> pending_;
  // Nodes of decided requests kept for the next ones (no allocation per
  // request); at most kSpareNodes.
  static constexpr std::size_t kSpareNodes = 64;
  std::vector<decltype(pending_)::node_type> spare_nodes_;
  // With eviction on: who waits on each dispatched request, by ticket, so an
  // eviction can reach it; dropped at its completion.
  std::unordered_map<std::uint64_t, std::shared_ptr<Waiter>> in_flight_;
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::size_t> queued_{0};
  std::atomic<std::uint64_t> events_{0};
};

}  // namespace sluice::flowcontrol
