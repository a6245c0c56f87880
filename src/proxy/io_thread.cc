#include "proxy/io_thread.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "observe/log.h"
#include "proxy/client_connection.h"
#include "proxy/reactor_hint.h"

namespace sluice::proxy {

namespace net = boost::asio;

IoThread::IoThread(std::size_t index, ProxyContext& ctx, std::uint64_t id_prefix)
    : index_(index),
      ioc_(1),
      pool_(ctx.endpoints.size(), ctx.config.server.upstream_max_idle_per_endpoint),
      id_prefix_(id_prefix),
      token_cache_(ctx.config.auth.jwt.enabled ? ctx.config.auth.jwt.cache_entries : 1),
      stats_(ctx.config.server.metrics_max_flows) {
  producer_ = ctx.flow_control->make_producer();
  shell_ = ctx.flow_control.get();
  policy_ = ctx.policy;
  authenticator_ = ctx.authenticator;
}

void IoThread::new_request_id(std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.resize(32);
  std::uint64_t parts[2] = {id_prefix_, ++request_seq_};
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 16; ++i) out[p * 16 + i] = kHex[(parts[p] >> (60 - 4 * i)) & 0xf];
}

bool IoThread::take_spare_body(std::string& body) {
  if (spare_bodies_.empty()) return false;
  body.swap(spare_bodies_.back());
  spare_bodies_.pop_back();
  return true;
}

void IoThread::give_back_body(std::string& body) {
  if (spare_bodies_.size() < kSpareBodies && body.capacity() <= kSpareBodyCapacity) {
    body.clear();
    spare_bodies_.push_back(std::move(body));
  }
  std::string().swap(body);
}

void IoThread::enqueue(std::uint64_t cookie, flowcontrol::EnqueueRequest e,
                       std::shared_ptr<flowcontrol::Waiter> waiter) {
  shell_->enqueue(*producer_, cookie, std::move(e), std::move(waiter));
}

void IoThread::cancel(std::uint64_t cookie) { shell_->cancel(*producer_, cookie); }

void IoThread::complete(std::uint64_t ticket, std::uint64_t output_tokens) {
  shell_->complete(*producer_, ticket, output_tokens);
}

void IoThread::report_output_tokens(std::uint64_t ticket, std::uint64_t output_tokens) {
  shell_->report_output_tokens(*producer_, ticket, output_tokens);
}

void IoThread::response_started(std::uint64_t ticket) {
  shell_->response_started(*producer_, ticket);
}

void IoThread::wake_dispatcher() {
  // Inline, the shell's own wake is already one post per pass.
  if (shell_->is_inline()) return shell_->wake();
  if (wake_scheduled_) return;
  wake_scheduled_ = true;
  net::post(ioc_, [this] {
    wake_scheduled_ = false;
    shell_->wake();
  });
}

void IoThread::defer_watch(ClientConnection& c) {
  deferred_watches_.enroll(c);
  if (!watch_tick_pending_) start_watch_tick();
}

void IoThread::forget_watch(ClientConnection& c) { deferred_watches_.remove(c); }

void IoThread::start_watch_tick() {
  if (!watch_tick_) watch_tick_.emplace(ioc_);
  watch_tick_pending_ = true;
  watch_tick_->expires_after(kWatchTick);
  watch_tick_->async_wait([this](boost::system::error_code ec) {
    watch_tick_pending_ = false;
    if (ec) return;
    deferred_watches_.advance(
        [](DeferredWatches::Hook& h) { static_cast<ClientConnection&>(h).arm_deferred_watch(); });
    if (!deferred_watches_.empty()) start_watch_tick();
  });
}

void IoThread::hint_read(UpstreamConnection& conn) {
  if (!reactor_hint_supported() || !arm_close_watch()) return;
  if (hinted_reads_.hint(conn, conn.stream.socket().native_handle()))
    skip_next_speculative_read(conn.stream.socket());
}

namespace {
void rearm(HintedReads::Hook& h) {
  rearm_read_readiness(static_cast<UpstreamConnection&>(h).stream.socket());
}
}  // namespace

bool IoThread::arm_close_watch() {
  if (close_watch_armed_) return true;
  if (hinted_reads_.stopped() || hinted_reads_.fd() < 0) return false;
  if (!close_watch_) {
    const int fd = ::fcntl(hinted_reads_.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return false;  // (descriptors exhausted: no hint this time)
    boost::system::error_code ec;
    close_watch_.emplace(ioc_);
    close_watch_->assign(fd, ec);
    if (ec) {
      ::close(fd);
      close_watch_.reset();
      return false;
    }
  }
  close_watch_armed_ = true;
  close_watch_->async_wait(
      net::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
        close_watch_armed_ = false;
        if (ec) {
          // Closed at shutdown; anything else would leave
          // hinted reads unwatched: no more hints.
          if (ec != net::error::operation_aborted)
            SLUICE_LOG(kWarn, "server", "upstream close watch failed: " << ec.message());
          hinted_reads_.stop(rearm);
          return;
        }
        hinted_reads_.drain(rearm);
        arm_close_watch();
      });
  return true;
}

void IoThread::stop_hinting() {
  hinted_reads_.stop(rearm);
  if (close_watch_) close_watch_->close();
}

void IoThread::start_pool_sweep(ProxyContext& ctx) {
  pool_sweep_.emplace(ioc_);
  sweep_pool(ctx);
}

void IoThread::sweep_pool(ProxyContext& ctx) {
  pool_sweep_->expires_after(std::chrono::seconds(1));
  pool_sweep_->async_wait([this, &ctx](boost::system::error_code ec) {
    if (ec || ctx.shutting_down.load()) return;
    pool_.sweep(std::chrono::steady_clock::now(), ctx.config.server.upstream_pool_idle_timeout,
                [&ctx](std::size_t e) {
                  return e < ctx.endpoints.size() &&
                         ctx.endpoints.at(e).removed.load(std::memory_order_relaxed);
                });
    sweep_pool(ctx);
  });
}

void IoThread::stop_upstreams() {
  pool_.close_all();
  if (pool_sweep_) pool_sweep_->cancel();
  stop_hinting();
}

void IoThread::request_admitted() {
  if (inline_.host && !inline_.in_pass && !inline_.draining &&
      ++inline_.admitted_since_pass >= kEarlyPassAfter)
    return shell_->pass();
  wake_dispatcher();
}

void IoThread::deliver(std::shared_ptr<ClientConnection> connection,
                       const flowcontrol::Decision& d) {
  inbox_.enqueue(Delivery{std::move(connection), d});
  // During this thread's inline pass, end_inline_pass() drains (the flag
  // is this thread's: read only when running on it).
  if (ioc_.get_executor().running_in_this_thread() && inline_.in_pass) return;
  if (!drain_pending_.exchange(true, std::memory_order_acq_rel))
    net::post(ioc_, [this] { drain_inbox(); });
}

void IoThread::drain_inbox() {
  // Reset first: a delivery racing with this drain either lands in this
  // loop or posts another drain (harmless when empty).
  drain_pending_.store(false, std::memory_order_release);
  const bool outer = !std::exchange(inline_.draining, true);
  Delivery d;
  while (inbox_.try_dequeue(d)) {
    d.connection->on_decision(d.decision);
    d.connection.reset();
  }
  if (outer) inline_.draining = false;
}

}  // namespace sluice::proxy
