#include "observe/log.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
constexpr const char* kNames[] = {"debug", "info", "warn", "error"};

void write_all(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(STDERR_FILENO, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr closed or broken: nothing more to do
    off += static_cast<std::size_t>(n);
  }
}

// The background writer's state. Leaked on purpose: lines may be logged
// from static destructors after main returns.
struct Writer {
  std::mutex mu;
  std::condition_variable cv;
  std::string pending;
  std::uint64_t dropped_since = 0;  // since the last "dropped" line
  bool stop = false;
  std::thread thread;
  std::atomic<bool> running{false};
  std::atomic<std::uint64_t> dropped{0};

  void run() {
    std::string out;
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !pending.empty(); });
      if (pending.empty() && stop) return;
      out.swap(pending);
      lock.unlock();
      write_all(out);  // the only place that may block on stderr
      out.clear();
      if (out.capacity() > kMaxPending) std::string().swap(out);
      lock.lock();
    }
  }
};

Writer& writer() {
  static Writer* w = new Writer;
  return *w;
}

}  // namespace

void start_writer() {
  Writer& w = writer();
  std::lock_guard lock(w.mu);
  if (w.running.load()) return;
  w.stop = false;
  w.running.store(true);
  // The writer takes no signal: a process-directed SIGTERM or SIGINT must
  // reach the thread that waits for it, not end the process here (the
  // thread inherits the mask it is created with).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  w.thread = std::thread([&w] { w.run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  static const bool registered = [] {
    std::atexit([] { stop_writer(); });
    return true;
  }();
  (void)registered;
}

void stop_writer() {
  Writer& w = writer();
  {
    std::lock_guard lock(w.mu);
    if (!w.running.load()) return;
    w.running.store(false);  // under the lock: a line either goes to pending first or is direct
    w.stop = true;
  }
  w.cv.notify_one();
  if (w.thread.joinable()) w.thread.join();
  // A line that came in as the writer stopped.
  std::lock_guard lock(w.mu);
  write_all(w.pending);
  w.pending.clear();
}

std::uint64_t dropped() { return writer().dropped.load(std::memory_order_relaxed); }

void set_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

bool parse_level(std::string_view text, Level& out) {
  for (int i = 0; i < 4; ++i) {
    if (text == kNames[i]) {
      out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

void write(Level level, std::string_view component, const std::string& message) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[80];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string line;
  line.reserve(64 + message.size());
  line += stamp;
  line += ' ';
  line += kNames[static_cast<int>(level)];
  line += ' ';
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  Writer& w = writer();
  {
    std::unique_lock lock(w.mu);
    if (!w.running.load(std::memory_order_relaxed)) {
      lock.unlock();
      return write_all(line);
    }
    if (w.pending.size() + line.size() > kMaxPending) {
      w.dropped_since += 1;
      w.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (w.dropped_since > 0) {
      w.pending += std::string(stamp) + " warn log: " + std::to_string(w.dropped_since) +
                   " line(s) dropped: stderr was not read fast enough\n";
      w.dropped_since = 0;
    }
    w.pending += line;
  }
  w.cv.notify_one();
}

bool RateLimit::allow(std::uint64_t& suppressed) {
  suppressed = 0;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t start = window_start_ns_.load(std::memory_order_relaxed);
  if (now - start >= 1'000'000'000 &&
      window_start_ns_.compare_exchange_strong(start, now, std::memory_order_relaxed)) {
    in_window_.store(0, std::memory_order_relaxed);
    suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) < kLinesPerSecond) return true;
  // Held back (and what this call took over, if a race filled the window).
  suppressed_.fetch_add(suppressed + 1, std::memory_order_relaxed);
  suppressed = 0;
  return false;
}

void write_suppressed(Level level, std::string_view component, std::uint64_t suppressed) {
  if (suppressed == 0) return;
  write(level, component,
        std::to_string(suppressed) + " similar line(s) suppressed (at most " +
            std::to_string(RateLimit::kLinesPerSecond) + " a second from one place)");
}

}  // namespace sluice::log
