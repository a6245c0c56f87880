// Minimal leveled logging to stderr. Not for the per-request hot path: only
// errors, state changes and startup/shutdown are logged. Each line is one
// write(2), so lines from different threads do not interleave.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace sluice::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
bool enabled(Level level);
bool parse_level(std::string_view text, Level& out);
void write(Level level, std::string_view component, const std::string& message);

}  // namespace sluice::log

#define SLUICE_LOG(level, component, expr)                                                \
  do {                                                                                    \
    if (::sluice::log::enabled(::sluice::log::Level::level)) {                            \
      std::ostringstream sluice_log_os_;                                                  \
      sluice_log_os_ << expr;                                                             \
      ::sluice::log::write(::sluice::log::Level::level, component, sluice_log_os_.str()); \
    }                                                                                     \
  } while (0)
