#include "proxy/io_thread.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "observe/log.h"
#include "proxy/http_session.h"
#include "proxy/reactor_hint.h"

namespace sluice::proxy {

namespace net = boost::asio;

void Worker::wake_dispatcher() {
  // Inline, the shell's own wake is already one post per pass.
  if (shell->is_inline()) return shell->wake();
  if (wake_scheduled_) return;
  wake_scheduled_ = true;
  net::post(ioc, [this] {
    wake_scheduled_ = false;
    shell->wake();
  });
}

void Worker::defer_watch(HttpSession& session) {
  deferred_watches.enroll(session);
  if (!watch_tick_pending_) start_watch_tick();
}

void Worker::start_watch_tick() {
  if (!watch_tick) watch_tick.emplace(ioc);
  watch_tick_pending_ = true;
  watch_tick->expires_after(kWatchTick);
  watch_tick->async_wait([this](boost::system::error_code ec) {
    watch_tick_pending_ = false;
    if (ec) return;
    deferred_watches.advance(
        [](DeferredWatches::Hook& h) { static_cast<HttpSession&>(h).arm_deferred_watch(); });
    if (!deferred_watches.empty()) start_watch_tick();
  });
}

void Worker::hint_read(UpstreamConnection& conn) {
  if (!reactor_hint_supported() || !arm_close_watch()) return;
  if (hinted_reads.hint(conn, conn.stream.socket().native_handle()))
    skip_next_speculative_read(conn.stream.socket());
}

namespace {
void rearm(HintedReads::Hook& h) {
  rearm_read_readiness(static_cast<UpstreamConnection&>(h).stream.socket());
}
}  // namespace

bool Worker::arm_close_watch() {
  if (close_watch_armed_) return true;
  if (hinted_reads.stopped() || hinted_reads.fd() < 0) return false;
  if (!close_watch) {
    const int fd = ::fcntl(hinted_reads.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return false;  // (descriptors exhausted: no hint this time)
    boost::system::error_code ec;
    close_watch.emplace(ioc);
    close_watch->assign(fd, ec);
    if (ec) {
      ::close(fd);
      close_watch.reset();
      return false;
    }
  }
  close_watch_armed_ = true;
  close_watch->async_wait(
      net::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
        close_watch_armed_ = false;
        if (ec) {
          // Closed at shutdown; anything else would leave
          // hinted reads unwatched: no more hints.
          if (ec != net::error::operation_aborted)
            SLUICE_LOG(kWarn, "server", "upstream close watch failed: " << ec.message());
          hinted_reads.stop(rearm);
          return;
        }
        hinted_reads.drain(rearm);
        arm_close_watch();
      });
  return true;
}

void Worker::stop_hinting() {
  hinted_reads.stop(rearm);
  if (close_watch) close_watch->close();
}

void Worker::request_admitted() {
  if (inline_host_ && !in_inline_pass_ && !draining_ && ++admitted_since_pass_ >= kEarlyPassAfter)
    return shell->pass();
  wake_dispatcher();
}

void Worker::deliver(std::shared_ptr<HttpSession> session, const flowcontrol::Decision& d) {
  inbox_.enqueue(Delivery{std::move(session), d});
  // During this thread's inline pass, end_inline_pass() drains (the flag
  // is this thread's: read only when running on it).
  if (ioc.get_executor().running_in_this_thread() && in_inline_pass_) return;
  if (!drain_pending_.exchange(true, std::memory_order_acq_rel))
    net::post(ioc, [this] { drain_inbox(); });
}

void Worker::drain_inbox() {
  // Reset first: a delivery racing with this drain either lands in this
  // loop or posts another drain (harmless when empty).
  drain_pending_.store(false, std::memory_order_release);
  const bool outer = !std::exchange(draining_, true);
  Delivery d;
  while (inbox_.try_dequeue(d)) {
    d.session->on_decision(d.decision);
    d.session.reset();
  }
  if (outer) draining_ = false;
}

}  // namespace sluice::proxy
