// How many connections a listener holds open at most. Each accepted
// connection takes a Permit (RAII: the count drops when its session, or
// whatever owns the permit, is destroyed); past the limit the connection is
// answered at once — a short 503 written without blocking — and closed, so
// a client holding thousands of idle connections cannot take every
// descriptor sluice has.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace sluice::proxy {

class ConnectionLimit {
 public:
  explicit ConnectionLimit(std::uint64_t max) : max_(max) {}
  ConnectionLimit(const ConnectionLimit&) = delete;
  ConnectionLimit& operator=(const ConnectionLimit&) = delete;

  class Permit {
   public:
    Permit() = default;
    explicit Permit(ConnectionLimit* limit) : limit_(limit) {}
    Permit(Permit&& o) noexcept : limit_(std::exchange(o.limit_, nullptr)) {}
    Permit& operator=(Permit&& o) noexcept {
      if (this != &o) {
        release();
        limit_ = std::exchange(o.limit_, nullptr);
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { release(); }
    explicit operator bool() const { return limit_ != nullptr; }

   private:
    void release() {
      if (limit_) limit_->open_.fetch_sub(1, std::memory_order_relaxed);
      limit_ = nullptr;
    }
    ConnectionLimit* limit_ = nullptr;
  };

  // A permit, or an empty one at the limit (the refusal counted unless the
  // caller makes room another way).
  Permit try_acquire(bool count_refusal = true) {
    if (open_.fetch_add(1, std::memory_order_relaxed) >= max_) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      if (count_refusal) refused_.fetch_add(1, std::memory_order_relaxed);
      return Permit();
    }
    return Permit(this);
  }

  std::uint64_t max() const { return max_; }
  std::uint64_t open() const { return open_.load(std::memory_order_relaxed); }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // A connection closed to make room for a new one (the admin plane).
  void note_displaced() { displaced_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t displaced() const { return displaced_.load(std::memory_order_relaxed); }

  // Best effort, never blocking: writes a 503 `too-many-connections`
  // (Retry-After: 1, Connection: close) to a freshly accepted socket (unless
  // `answer` is false: a TLS client expects a handshake) and reads what the
  // client already sent (so the close is not a reset). The caller closes it.
  static void refuse(int fd, bool answer = true);

 private:
  std::atomic<std::uint64_t> open_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> displaced_{0};
  const std::uint64_t max_;
};

}  // namespace sluice::proxy
