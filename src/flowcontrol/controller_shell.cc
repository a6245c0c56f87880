#include "flowcontrol/controller_shell.h"

#include <pthread.h>

#include <algorithm>
#include <future>

namespace sluice::flowcontrol {

ControllerShell::ControllerShell(std::unique_ptr<Controller> controller, ClockFn clock)
    : controller_(std::move(controller)), clock_(std::move(clock)) {
  // Decisions come out of the controller synchronously, on this thread.
  controller_->set_sink([this](const Decision& d) { on_decision(d); });
  spare_nodes_.reserve(kSpareNodes);
}

ControllerShell::~ControllerShell() { stop(); }

void ControllerShell::start() {
  running_ = true;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-dispatch");
    run();
  });
}

void ControllerShell::start_inline(DispatchHost* host) {
  host_ = host;
  running_ = true;
  wake();
}

void ControllerShell::pass() {
  if (!running_.load() || finished_.load()) return;
  host_->before_pass();
  host_->arm(run_pass());
  host_->after_pass();
}

void ControllerShell::finish() {
  if (finished_.exchange(true)) return;
  if (host_) host_->disarm();
  controller_->shutdown(clock_());
  // Anything queued for us at the stop: requests that never reached the
  // controller end like the queued ones. Only what is there now: producers
  // still pushing would keep an unbounded drain (and the stop) going for as
  // long as they push; stop() drains the rest once they reject their own.
  reject_after_stop(queue_.size_approx() + 1);
}

void ControllerShell::stop() {
  if (host_) {
    if (!running_.exchange(false)) return;
    // The last pass on the host's thread (the one writer), which still runs
    // its loop; bounded, should it have stopped — then no pass can race.
    if (host_->on_host_thread()) {
      finish();
    } else {
      auto done = std::make_shared<std::promise<void>>();
      auto ended = done->get_future();
      host_->post([this, done] {
        finish();
        done->set_value();
      });
      if (ended.wait_for(std::chrono::seconds(5)) != std::future_status::ready) finish();
    }
    stopped_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    reject_after_stop();
    return;
  }
  if (!thread_.joinable()) return;
  // A flag, not an event: the queue does not order events across producers
  // and drains the fullest first, so a stop event could wait behind a flood.
  running_.store(false);
  wake();
  thread_.join();
  // An enqueue that raced with the stop either sees stopped_ and rejects
  // what it pushed itself, or pushed before this drain sees the queue (the
  // two fences make it one or the other; both is harmless).
  stopped_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  reject_after_stop();
}

void ControllerShell::reject_after_stop(std::size_t at_most) {
  // One drainer at a time: a dequeue that races another consumer's can
  // miss an element, and then every drainer could.
  std::lock_guard lock(reject_mu_);
  Event e;
  for (std::size_t n = 0; n < at_most && queue_.try_dequeue(e); ++n) {
    if (e.kind == Event::Kind::kEnqueue && e.waiter) {
      Decision d;
      d.cookie = e.id;
      d.outcome = QueueOutcome::kEvictedOther;
      e.waiter->deliver(d);
    }
    e = Event{};
  }
}

void ControllerShell::enqueue(Producer& p, std::uint64_t cookie, EnqueueRequest request,
                              std::shared_ptr<Waiter> waiter) {
  Event e;
  e.kind = Event::Kind::kEnqueue;
  e.id = cookie;
  e.request = std::move(request);
  e.request.cookie = cookie;
  e.waiter = std::move(waiter);
  queue_.enqueue(p, std::move(e));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (stopped_.load(std::memory_order_relaxed)) reject_after_stop();
}

void ControllerShell::push_simple(Producer& p, Event::Kind kind, std::uint64_t id,
                                  std::uint64_t tokens) {
  Event e;
  e.kind = kind;
  e.id = id;
  e.tokens = tokens;
  queue_.enqueue(p, std::move(e));
}

void ControllerShell::cancel(Producer& p, std::uint64_t cookie) {
  push_simple(p, Event::Kind::kCancel, cookie, 0);
}

void ControllerShell::report_output_tokens(Producer& p, std::uint64_t ticket, std::uint64_t total) {
  push_simple(p, Event::Kind::kOutput, ticket, total);
}

void ControllerShell::complete(Producer& p, std::uint64_t ticket, std::uint64_t total) {
  push_simple(p, Event::Kind::kComplete, ticket, total);
}

void ControllerShell::response_started(Producer& p, std::uint64_t ticket) {
  push_simple(p, Event::Kind::kStarted, ticket, 0);
}

void ControllerShell::update_metrics(Producer& p, std::size_t endpoint, const EndpointMetrics& m) {
  Event e;
  e.kind = Event::Kind::kMetrics;
  e.endpoint = endpoint;
  e.metrics = m;
  queue_.enqueue(p, std::move(e));
}

void ControllerShell::reconfigure(Producer& p, std::function<void(Controller&)> change,
                                  std::function<void()> done) {
  Event e;
  e.kind = Event::Kind::kReconfigure;
  e.change = std::move(change);
  e.done = std::move(done);
  queue_.enqueue(p, std::move(e));
  wake();
}

void ControllerShell::on_decision(const Decision& d) {
  if (d.outcome == QueueOutcome::kEvictedPreempted) {
    // A dispatched request evicted in flight: its completion (which the
    // exchange sends once it has stopped the upstream) confirms it.
    auto in = in_flight_.find(d.ticket);
    if (in != in_flight_.end()) in->second->deliver(d);
    return;
  }
  auto it = pending_.find(d.cookie);
  if (it == pending_.end()) return;  // cannot happen: one decision per request
  auto waiter = std::move(it->second.waiter);
  if (spare_nodes_.size() < kSpareNodes) {
    spare_nodes_.push_back(pending_.extract(it));
  } else {
    pending_.erase(it);
  }
  if (d.outcome == QueueOutcome::kDispatched && controller_->eviction_enabled())
    in_flight_[d.ticket] = waiter;
  waiter->deliver(d);
}

void ControllerShell::handle(Event& e, TimePoint now) {
  switch (e.kind) {
    case Event::Kind::kEnqueue: {
      Pending* slot;
      if (!spare_nodes_.empty()) {
        auto node = std::move(spare_nodes_.back());
        spare_nodes_.pop_back();
        node.key() = e.id;
        node.mapped() = Pending{};
        auto r = pending_.insert(std::move(node));
        if (!r.inserted) spare_nodes_.push_back(std::move(r.node));  // the id's slot is reused
        slot = &r.position->second;
      } else {
        slot = &pending_[e.id];
      }
      slot->waiter = std::move(e.waiter);
      // A rejection is decided (and delivered, erasing the slot) inside
      // enqueue; only a queued request keeps its slot.
      const std::uint64_t ticket = controller_->enqueue(e.request, now);
      if (ticket) {
        auto it = pending_.find(e.id);
        if (it != pending_.end()) it->second.ticket = ticket;
      }
      break;
    }
    case Event::Kind::kCancel: {
      auto it = pending_.find(e.id);
      // Already decided (dispatched or rejected): the exchange handles it.
      if (it != pending_.end() && it->second.ticket) controller_->cancel(it->second.ticket, now);
      break;
    }
    case Event::Kind::kOutput:
      controller_->report_output_tokens(e.id, e.tokens);
      break;
    case Event::Kind::kComplete:
      controller_->complete(e.id, e.tokens, now);
      if (!in_flight_.empty()) in_flight_.erase(e.id);
      break;
    case Event::Kind::kStarted:
      controller_->response_started(e.id);
      break;
    case Event::Kind::kMetrics:
      controller_->update_metrics(e.endpoint, e.metrics, now);
      break;
    case Event::Kind::kReconfigure:
      if (e.change) e.change(*controller_);
      if (e.done) e.done();
      break;
    case Event::Kind::kStop:
      running_ = false;
      break;
  }
}

TimePoint ControllerShell::run_pass() {
  constexpr std::size_t kBatch = 256;
  if (batch_.size() != kBatch) batch_.resize(kBatch);
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  const TimePoint now = clock_();
  std::size_t n;
  while (running_ && (n = queue_.try_dequeue_bulk(batch_.begin(), kBatch)) > 0) {
    events_.fetch_add(n, std::memory_order_relaxed);
    controller_->for_each_prefetched(
        n,
        [&](std::size_t j) -> const EnqueueRequest* {
          return batch_[j].kind == Event::Kind::kEnqueue ? &batch_[j].request : nullptr;
        },
        [&](std::size_t i) {
          handle(batch_[i], now);
          batch_[i] = Event{};  // drop waiters and strings now, not at the next overwrite
        });
  }
  // With nothing due, a pass at least once a second to collect idle flows.
  TimePoint next = now + std::chrono::seconds(1);
  if (!running_) return next;
  controller_->expire(now);
  released_.fetch_add(controller_->dispatch(now), std::memory_order_relaxed);
  queued_.store(controller_->queued() + queue_.size_approx(), std::memory_order_relaxed);
  if (auto d = controller_->next_deadline()) next = std::min(next, std::max(*d, now));
  return next;
}

void ControllerShell::run() {
  TimePoint next = clock_();
  while (running_) {
    // Sleep until woken or the next pass is due.
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(next - clock_()).count();
    wake_.wait(std::clamp<std::int64_t>(us, 0, 1000000));
    // Absorb the other pending signals first, then drain everything: an
    // event pushed after the drain comes with a signal of its own.
    wake_.tryWaitMany(1 << 20);
    next = run_pass();
  }
  finish();
}

}  // namespace sluice::flowcontrol
