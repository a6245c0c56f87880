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
// thread and must only hand the decision over (e.g. post it to the
// session's executor): no blocking, no calls back into the shell.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void deliver(const Decision& decision) = 0;
};

class ControllerShell {
 public:
  using Producer = moodycamel::ProducerToken;
  using ClockFn = std::function<TimePoint()>;

  ControllerShell(std::unique_ptr<Controller> controller, ClockFn clock = Clock::now);
  ~ControllerShell();

  void start();
  // Ends every queued request (EvictedOther), then stops the thread. A
  // request enqueued after the stop (an I/O thread that raced with it) gets
  // EvictedOther at once, on the enqueuing thread: none waits for ever.
  void stop();

  // One token per producing thread (I/O thread); tokens are not thread-safe.
  std::unique_ptr<Producer> make_producer() { return std::make_unique<Producer>(queue_); }

  // Wakes the dispatcher to handle what was pushed. Any thread.
  void wake() { wake_.signal(); }

  // The calls below push an event; call wake() after them.
  // `cookie` is the caller's unique id for the request (to cancel it by).
  void enqueue(Producer& p, std::uint64_t cookie, EnqueueRequest request,
               std::shared_ptr<Waiter> waiter);
  void cancel(Producer& p, std::uint64_t cookie);
  void report_output_tokens(Producer& p, std::uint64_t ticket, std::uint64_t total);
  void complete(Producer& p, std::uint64_t ticket, std::uint64_t total_output_tokens);
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
      kMetrics,
      kReconfigure,
      kStop
    };
    Kind kind = Kind::kStop;
    std::uint64_t id = 0;  // cookie (enqueue, cancel) or ticket (output, complete)
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
  void handle(Event& e, TimePoint now);
  void on_decision(const Decision& d);
  // After the stop: empties the queue, ending each request EvictedOther.
  void reject_after_stop(std::size_t at_most = SIZE_MAX);

  std::unique_ptr<Controller> controller_;
  ClockFn clock_;
  moodycamel::ConcurrentQueue<Event> queue_;
  moodycamel::LightweightSemaphore wake_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stopped_{false};  // the thread has ended; nothing drains the queue
  std::mutex reject_mu_;              // reject_after_stop (cold: after the stop only)
  // Dispatcher-thread only: requests waiting for their decision, by cookie.
  struct Pending {
    std::shared_ptr<Waiter> waiter;
    std::uint64_t ticket = 0;
  };
  std::unordered_map<std::uint64_t, Pending> pending_;
  // With eviction on: who waits on each dispatched request, by ticket, so an
  // eviction can reach it; dropped at its completion.
  std::unordered_map<std::uint64_t, std::shared_ptr<Waiter>> in_flight_;
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::size_t> queued_{0};
  std::atomic<std::uint64_t> events_{0};
};

}  // namespace sluice::flowcontrol
