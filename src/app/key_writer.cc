#include "app/key_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>

namespace sluice::app {

KeyWriter::KeyWriter(std::size_t max_pending, std::atomic<std::uint64_t>& pending,
                     std::atomic<std::uint64_t>& refused, std::string gate)
    : max_pending_(max_pending), pending_(pending), refused_(refused), gate_(std::move(gate)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-keys");
    run();
  });
}

KeyWriter::~KeyWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  if (gate_fd_ >= 0) ::close(gate_fd_);
}

bool KeyWriter::submit(std::function<void()> change) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || waiting_.size() + (making_ ? 1 : 0) >= max_pending_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    waiting_.push_back(std::move(change));
    pending_.fetch_add(1, std::memory_order_relaxed);
  }
  wake_.notify_one();
  return true;
}

void KeyWriter::reload(std::function<void()> read) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    reload_ = std::move(read);
  }
  wake_.notify_one();
}

void KeyWriter::run() {
  for (;;) {
    std::function<void()> change;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || reload_ || !waiting_.empty(); });
      if (reload_) {
        std::function<void()> read = std::move(reload_);
        reload_ = nullptr;
        lock.unlock();
        read();
        continue;
      }
      if (waiting_.empty()) return;  // stopping, nothing left
      change = std::move(waiting_.front());
      waiting_.pop_front();
      making_ = true;
    }
    wait_at_gate();
    change();
    std::lock_guard lock(mu_);
    making_ = false;
    pending_.fetch_sub(1, std::memory_order_relaxed);
  }
}

// The test's FIFO: one byte per change. Its end of the FIFO closed (the
// test gone), reads return at once and nothing waits any more.
void KeyWriter::wait_at_gate() {
  if (gate_.empty()) return;
  if (gate_fd_ < 0) gate_fd_ = ::open(gate_.c_str(), O_RDONLY | O_CLOEXEC);
  if (gate_fd_ < 0) return;
  char byte;
  while (::read(gate_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
}

}  // namespace sluice::app
