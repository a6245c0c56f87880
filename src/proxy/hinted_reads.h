// The upstream connections of one I/O thread whose next read waits for
// readiness mid-stream, and the watch that keeps that from losing a close.
//
// A streaming answer comes one event at a time. After each, Asio starts the
// next read with a receive, which fails (EAGAIN) when the next event is
// still being generated: one system call per relayed event, the largest
// difference between sluice and HAProxy per event in bench/streams.sh.
// So the read that completes short in the middle of a framed body gives
// the reactor hint (proxy/reactor_hint.h) and the next read waits for
// readiness instead.
//
// Bytes that come after the hint bring a readiness event of their own: the
// reactor sets the flag the hint clears when it acts on a readiness event,
// and it acts on one taken in after the receive only after the handlers
// queued before it, the read's completion among them (one thread, in
// order). What the hint can lose is a close that came with the last bytes
// read: the event that reported both was taken, and no other comes. So a
// connection is registered, the first time its read is hinted, in an epoll
// set of this thread's that asks for nothing but the peer's close
// (EPOLLRDHUP, edge triggered: bytes do not wake it; a connection that is
// closed already is reported at once). The set's descriptor is watched by
// the I/O thread's loop; each close it reports marks its connection, and a
// connection whose read is hinted then has its readiness reported again
// (reactor_hint.h's rearm_read_readiness), so the read ends with the close.
// A close reported before the read's completion gives its hint makes the
// hint be refused instead. Nothing is done per relayed event beyond two
// stores; one registration per connection (the first hint), one wake-up
// per close.
//
// One thread only. A hook is unregistered when its connection is destroyed
// (the kernel forgets a closed descriptor by itself).
#pragma once

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

namespace sluice::proxy {

class HintedReads {
 public:
  class Hook {
   public:
    Hook() = default;
    Hook(const Hook&) = delete;
    Hook& operator=(const Hook&) = delete;
    // Its read waits for readiness because of a hint.
    bool hinted() const { return hinted_; }
    // The set reported the peer's close (or an error) on its connection.
    bool peer_closed() const { return peer_closed_; }
    bool registered() const { return owner_ != nullptr; }

   protected:
    ~Hook() {
      if (owner_) owner_->forget(*this);
    }

   private:
    friend class HintedReads;
    HintedReads* owner_ = nullptr;
    int fd_ = -1;
    bool hinted_ = false;
    bool peer_closed_ = false;
  };

  HintedReads() : epfd_(::epoll_create1(EPOLL_CLOEXEC)) {}
  HintedReads(const HintedReads&) = delete;
  HintedReads& operator=(const HintedReads&) = delete;
  ~HintedReads() {
    for (Hook* h : by_fd_)
      if (h) h->owner_ = nullptr;
    if (epfd_ >= 0) ::close(epfd_);
  }

  // The set's descriptor, readable while it has closes to report (-1 if it
  // could not be created: then no hint is ever allowed).
  int fd() const { return epfd_; }

  // The read of `h`'s connection (descriptor `fd`) completed short in the
  // middle of a body. Returns whether its next read may wait for readiness
  // (and marks it hinted): not if the peer's close was reported already,
  // nor once stopped, nor if the registration fails.
  bool hint(Hook& h, int fd) {
    if (stopped_ || epfd_ < 0 || fd < 0 || h.peer_closed_) return false;
    if (h.owner_ != this || h.fd_ != fd) {
      if (h.owner_) h.owner_->forget(h);
      epoll_event ev{};
      ev.events = EPOLLRDHUP | EPOLLET;
      ev.data.fd = fd;
      if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST) return false;
      const auto i = static_cast<std::size_t>(fd);
      if (i >= by_fd_.size()) by_fd_.resize(i + 1, nullptr);
      // A hook still here for this number had its descriptor closed (the
      // kernel dropped that registration with it).
      if (by_fd_[i]) by_fd_[i]->owner_ = nullptr;
      by_fd_[i] = &h;
      h.owner_ = this;
      h.fd_ = fd;
    }
    h.hinted_ = true;
    return true;
  }

  // The hinted read completed (or there is none: the connection went idle).
  static void read_done(Hook& h) { h.hinted_ = false; }

  // Takes in the closes reported so far, without waiting. Each marks its
  // hook; a hook whose read is hinted is handed to `ready` (no longer
  // hinted), which must not destroy hooks. Returns how many were reported.
  template <class Ready>
  std::size_t drain(Ready&& ready) {
    if (epfd_ < 0) return 0;
    std::size_t reported = 0;
    epoll_event events[64];
    for (;;) {
      const int n = ::epoll_wait(epfd_, events, 64, 0);
      if (n <= 0) break;
      for (int k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(events[k].data.fd);
        Hook* h = i < by_fd_.size() ? by_fd_[i] : nullptr;
        if (!h) continue;
        ++reported;
        h->peer_closed_ = true;
        if (h->hinted_) {
          h->hinted_ = false;
          ready(*h);
        }
      }
      if (n < 64) break;
    }
    return reported;
  }

  // No hint from now on; every hook whose read is hinted is handed to
  // `ready` (no longer hinted), so that nothing depends on the set any more.
  template <class Ready>
  void stop(Ready&& ready) {
    stopped_ = true;
    for (Hook* h : by_fd_) {
      if (h && h->hinted_) {
        h->hinted_ = false;
        ready(*h);
      }
    }
  }
  bool stopped() const { return stopped_; }

 private:
  // The kernel dropped the registration when the descriptor was closed
  // (an UpstreamConnection's socket closes before its hook goes). A hook
  // destroyed with its descriptor still open leaves a registration that
  // reports to nobody (its slot is empty), and that a new hook for the same
  // open descriptor takes over (EEXIST).
  void forget(Hook& h) {
    const auto i = static_cast<std::size_t>(h.fd_);
    if (i < by_fd_.size() && by_fd_[i] == &h) by_fd_[i] = nullptr;
    h.owner_ = nullptr;
  }

  int epfd_;
  bool stopped_ = false;
  std::vector<Hook*> by_fd_;
};

}  // namespace sluice::proxy
