// The requests of one I/O thread whose client watch is not armed yet.
//
// A session notices its client leaving (while the request is queued, or
// while a non-streaming answer is generated) through a readiness wait on
// the client socket. Arming that wait costs a system call per request:
// Asio re-arms a non-speculative wait with EPOLL_CTL_MOD, which is how it
// never loses an edge (and also why a wait armed late still sees a close
// that came before it). Most answers are done long before the watch would
// matter, so a request enrolls here instead and its watch is armed only if
// it is still open one to two ticks later; the I/O thread's timer ticks
// only while the list is not empty.
//
// Intrusive and O(1) to enroll and to remove; the list is in enrollment
// order, so a tick walks only the hooks it arms. One thread only.
#pragma once

#include <cstdint>

namespace sluice::proxy {

class DeferredWatches {
 public:
  class Hook {
   public:
    Hook() = default;
    Hook(const Hook&) = delete;
    Hook& operator=(const Hook&) = delete;
    bool enrolled() const { return owner_ != nullptr; }

   protected:
    // The owner removes its hook before it is destroyed (its list may be
    // gone by then only if the hook is not enrolled).
    ~Hook() = default;

   private:
    friend class DeferredWatches;
    DeferredWatches* owner_ = nullptr;
    Hook* prev_ = nullptr;
    Hook* next_ = nullptr;
    std::uint64_t tick_ = 0;
  };

  DeferredWatches() = default;
  DeferredWatches(const DeferredWatches&) = delete;
  DeferredWatches& operator=(const DeferredWatches&) = delete;

  // Enrolls `h` in the current tick (a hook already enrolled is moved to
  // the tail, in the current tick). Returns whether the list was empty.
  bool enroll(Hook& h) {
    if (h.owner_) remove(h);
    const bool was_empty = head_ == nullptr;
    h.owner_ = this;
    h.tick_ = tick_;
    h.prev_ = tail_;
    h.next_ = nullptr;
    (tail_ ? tail_->next_ : head_) = &h;
    tail_ = &h;
    return was_empty;
  }

  // Removes `h` if it is enrolled here; a no-op otherwise.
  void remove(Hook& h) {
    if (h.owner_ != this) return;
    (h.prev_ ? h.prev_->next_ : head_) = h.next_;
    (h.next_ ? h.next_->prev_ : tail_) = h.prev_;
    h.owner_ = nullptr;
    h.prev_ = h.next_ = nullptr;
  }

  // Ends the current tick: every hook enrolled before the tick that just
  // ended (so open for at least one whole tick) is removed, then handed to
  // `arm` (which may enroll or remove hooks, this one included).
  template <class Arm>
  void advance(Arm&& arm) {
    ++tick_;
    while (head_ && head_->tick_ + 2 <= tick_) {
      Hook& h = *head_;
      remove(h);
      arm(h);
    }
  }

  bool empty() const { return head_ == nullptr; }

 private:
  Hook* head_ = nullptr;
  Hook* tail_ = nullptr;
  std::uint64_t tick_ = 0;
};

}  // namespace sluice::proxy
