// The admin API's key changes, made one at a time on a thread of their own
// (issue 39, item 9). With 20,000 keys, rendering the key file, syncing it
// and reading it back takes most of a second: the admin thread, which
// answers /healthz, hands the change here and answers the caller when the
// change is done, without waiting for it. At most `max_pending` changes
// are pending, waiting or being made (auth.apiKeys.maxPendingWrites); past
// that submit() refuses and the caller answers 503 key-writes-busy.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::app {

class KeyWriter {
 public:
  // `pending` counts the changes waiting or being made (a gauge on
  // /metrics); `refused` those submit() turned away. `gate`: a test's hold
  // on the writer, a FIFO from which one byte is read before each change
  // (SLUICE_TEST_KEY_WRITE_GATE; "" in production, and then nothing waits).
  KeyWriter(std::size_t max_pending, std::atomic<std::uint64_t>& pending,
            std::atomic<std::uint64_t>& refused, std::string gate = {});
  // Makes what is still waiting (each caller gets its answer), then joins.
  ~KeyWriter();
  KeyWriter(const KeyWriter&) = delete;
  KeyWriter& operator=(const KeyWriter&) = delete;

  // Any thread: `change` runs on the writer's thread after those submitted
  // before it; false (and it never runs) when max_pending are pending.
  bool submit(std::function<void()> change);
  // Any thread: the key file changed on disk; `read` runs on the writer's
  // thread, in order with the changes, so a slow read never puts back keys
  // older than a write made after it. Not counted, not held at the gate;
  // at most one waits (a second read reads the same file).
  void reload(std::function<void()> read);

 private:
  void run();
  void wait_at_gate();

  const std::size_t max_pending_;
  std::atomic<std::uint64_t>& pending_;
  std::atomic<std::uint64_t>& refused_;
  const std::string gate_;
  int gate_fd_ = -1;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> waiting_;  // under mu_
  std::function<void()> reload_;               // under mu_: a read waits
  bool making_ = false;                        // under mu_: a change runs
  bool stopping_ = false;                      // under mu_
  std::thread thread_;
};

}  // namespace sluice::app
