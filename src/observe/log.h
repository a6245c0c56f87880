// Minimal leveled logging to stderr. Not for the per-request hot path: only
// errors, state changes and startup/shutdown are logged. Lines from
// different threads do not interleave.
//
// In the daemon (after start_writer()) a line is appended to a bounded
// buffer under a short lock and written by a thread of its own, so a stalled
// reader of stderr (a full pipe) never blocks an I/O, admin or dispatcher
// thread: past kMaxPending bytes lines are dropped and counted (dropped()),
// and a "K line(s) dropped" line follows once there is room. Without the
// writer (tools, tests) each line is one write(2) on the calling thread.
//
// A line that can repeat per request or per event (an endpoint failing, an
// accept failing at the descriptor limit) goes through SLUICE_LOG_LIMITED:
// at most RateLimit::kLinesPerSecond lines per second from that call site;
// the first line after a second in which lines were held back is preceded
// by "K similar lines suppressed". So a failing endpoint under load costs a
// few write(2)s a second, not one per request.
#pragma once

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace sluice::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
bool enabled(Level level);
bool parse_level(std::string_view text, Level& out);
void write(Level level, std::string_view component, const std::string& message);

// The background writer: start once in main; stop_writer() writes what is
// pending and joins (also run at exit if still running).
inline constexpr std::size_t kMaxPending = 1u << 20;
void start_writer();
void stop_writer();
std::uint64_t dropped();

// One call site's budget (a static in SLUICE_LOG_LIMITED); any thread, no
// lock. Approximate under races: a line or two more or fewer per second.
class RateLimit {
 public:
  static constexpr std::uint32_t kLinesPerSecond = 5;
  // True if this line may be written; then `suppressed` is how many were
  // held back since the last line written (to report first).
  bool allow(std::uint64_t& suppressed);

 private:
  std::atomic<std::int64_t> window_start_ns_{0};
  std::atomic<std::uint32_t> in_window_{0};
  std::atomic<std::uint64_t> suppressed_{0};
};

// Writes "K similar lines suppressed" for `component` when K > 0.
void write_suppressed(Level level, std::string_view component, std::uint64_t suppressed);

}  // namespace sluice::log

#define SLUICE_LOG(level, component, expr)                                                \
  do {                                                                                    \
    if (::sluice::log::enabled(::sluice::log::Level::level)) {                            \
      std::ostringstream sluice_log_os_;                                                  \
      sluice_log_os_ << expr;                                                             \
      ::sluice::log::write(::sluice::log::Level::level, component, sluice_log_os_.str()); \
    }                                                                                     \
  } while (0)

#define SLUICE_LOG_LIMITED(level, component, expr)                                          \
  do {                                                                                      \
    if (::sluice::log::enabled(::sluice::log::Level::level)) {                              \
      static ::sluice::log::RateLimit sluice_log_limit_;                                    \
      std::uint64_t sluice_log_suppressed_ = 0;                                             \
      if (sluice_log_limit_.allow(sluice_log_suppressed_)) {                                \
        ::sluice::log::write_suppressed(::sluice::log::Level::level, component,             \
                                        sluice_log_suppressed_);                            \
        std::ostringstream sluice_log_os_;                                                  \
        sluice_log_os_ << expr;                                                             \
        ::sluice::log::write(::sluice::log::Level::level, component, sluice_log_os_.str()); \
      }                                                                                     \
    }                                                                                       \
  } while (0)
