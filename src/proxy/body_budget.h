// How many bytes of request bodies sluice holds at once while they are
// read, all connections together (server.maxBufferedBodyBytes). Without it
// the ceiling was maxConnections x maxBodyBytes (80 GiB with the defaults):
// 600 connections that each send part of a large body could take the
// process's memory.
//
// A request's body is charged as its bytes arrive (what a client announces
// costs nothing until it is sent) and given back once it is whole and
// queued (flow control's byte limits bound it then, with their fairness
// and displacement; dispatched, the pool's concurrency does) or, without
// flow control, when its answer starts; and whenever the request ends and
// its buffer is freed. A body of up to kAllowance bytes is not charged:
// that keeps the shared counter off the path of ordinary requests, and is
// bounded by server.maxConnections. A read that would pass the budget gets
// 503 `body-budget-exhausted` (Retry-After) and the connection closes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace sluice::proxy {

class BodyBudget {
 public:
  // Bytes a connection holds without charge (its read buffer and a small
  // body). A body past it is charged whole (not only the excess), so the
  // counter is what the bodies hold.
  static constexpr std::uint64_t kAllowance = 16 * 1024;

  explicit BodyBudget(std::uint64_t max) : max_(max) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

  // One request's charge; RAII (given back by the destructor).
  class Lease {
   public:
    Lease() = default;
    explicit Lease(BodyBudget* budget) : budget_(budget) {}
    Lease(Lease&& o) noexcept
        : budget_(std::exchange(o.budget_, nullptr)), held_(std::exchange(o.held_, 0)) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        reset();
        budget_ = std::exchange(o.budget_, nullptr);
        held_ = std::exchange(o.held_, 0);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }

    // The request now holds `bytes`: charges what more that is (nothing up
    // to kAllowance). False, with nothing more taken, past the budget.
    bool hold(std::uint64_t bytes) {
      if (!budget_ || bytes <= kAllowance || bytes <= held_) return true;
      if (!budget_->take(bytes - held_)) return false;
      held_ = bytes;
      return true;
    }
    // Gives everything back (the body's buffer is freed).
    void reset() {
      if (budget_ && held_ > 0) budget_->give(held_);
      held_ = 0;
    }

   private:
    BodyBudget* budget_ = nullptr;
    std::uint64_t held_ = 0;
  };

  Lease lease() { return Lease(this); }

  std::uint64_t max() const { return max_; }
  std::uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  bool take(std::uint64_t n) {
    std::uint64_t now = held_.load(std::memory_order_relaxed);
    do {
      if (n > max_ || now > max_ - n) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!held_.compare_exchange_weak(now, now + n, std::memory_order_relaxed));
    return true;
  }
  void give(std::uint64_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }

  std::atomic<std::uint64_t> held_{0};
  std::atomic<std::uint64_t> refused_{0};
  const std::uint64_t max_;
};

// The default budget: a quarter of the memory this process may use (the
// smaller of the machine's and its cgroup's limit), and at least one body
// of `max_body_bytes`.
std::uint64_t default_body_budget(std::uint64_t max_body_bytes);

}  // namespace sluice::proxy
