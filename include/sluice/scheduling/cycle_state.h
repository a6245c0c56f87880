// Per-request scheduling state: what one plugin computes during a cycle and
// another (or its own lifecycle hook) reads later, e.g. the prefix scorer's
// match for the prefix index update after dispatch.
//
// Typed by key: a CycleKey<T> is declared by the plugin that writes it (one
// key per plugin instance, so two instances never collide) and handed to the
// plugins that may read it. There is no free-form map that any layer may
// read. A CycleState lives exactly as long as its request: the dispatcher
// clears it when the request completes; its storage is reused for the next.
// Dispatcher thread only.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace sluice::scheduling {

namespace detail {
inline std::size_t next_cycle_slot() {
  static std::atomic<std::size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

template <class T>
class CycleKey {
 public:
  CycleKey() : slot_(detail::next_cycle_slot()) {}
  std::size_t slot() const { return slot_; }

 private:
  std::size_t slot_;
};

class CycleState {
 public:
  CycleState() = default;
  CycleState(const CycleState&) = delete;
  CycleState& operator=(const CycleState&) = delete;
  CycleState(CycleState&& o) noexcept : slots_(std::move(o.slots_)), used_(o.used_) {
    o.used_ = false;
  }
  CycleState& operator=(CycleState&& o) noexcept {
    if (this != &o) {
      clear();
      slots_.swap(o.slots_);
      used_ = o.used_;
      o.used_ = false;
    }
    return *this;
  }
  ~CycleState() { clear(); }

  // The value under `key`, or null if nothing was put this cycle.
  template <class T>
  T* get(const CycleKey<T>& key) const {
    if (key.slot() >= slots_.size()) return nullptr;
    return static_cast<T*>(slots_[key.slot()].value);
  }

  // Puts (or replaces) the value under `key`; returns it.
  template <class T, class... Args>
  T& put(const CycleKey<T>& key, Args&&... args) {
    if (key.slot() >= slots_.size()) slots_.resize(key.slot() + 1);
    Slot& s = slots_[key.slot()];
    if (s.value) s.destroy(s.value);
    T* v = new T(std::forward<Args>(args)...);
    s.value = v;
    s.destroy = [](void* p) { delete static_cast<T*>(p); };
    if (!used_) used_ = true;
    return *v;
  }

  // Ends the request's state; keeps the slot storage for the next request.
  void clear() {
    if (!used_) return;
    for (auto& s : slots_) {
      if (s.value) s.destroy(s.value);
      s.value = nullptr;
    }
    used_ = false;
  }

 private:
  struct Slot {
    void* value = nullptr;
    void (*destroy)(void*) = nullptr;
  };
  std::vector<Slot> slots_;
  bool used_ = false;
};

}  // namespace sluice::scheduling
