// A fixed-bucket latency histogram for LLM request times (1 ms to 1 h).
// Single writer, no atomics: the owner records, and whoever exports takes a
// copy on the owner's thread (the dispatcher for flow control, each I/O
// thread for its requests).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace sluice::flowcontrol {

struct LatencyHistogram {
  // Upper bounds in seconds: fine below a second (queueing, TTFT), coarse up
  // to the hour a long generation can take.
  static constexpr std::array<double, 20> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   20,
                                                     30,    60,     120,   300,  900,   3600};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};  // last: +Inf
  double sum = 0;

  void record_seconds(double s) {
    std::size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    counts[i] += 1;
    sum += s;
  }
  template <class Rep, class Period>
  void record(std::chrono::duration<Rep, Period> d) {
    record_seconds(std::chrono::duration<double>(d).count());
  }
  std::uint64_t count() const {
    std::uint64_t n = 0;
    for (auto c : counts) n += c;
    return n;
  }
  void add(const LatencyHistogram& o) {
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
    sum += o.sum;
  }
};

// A histogram over token counts (input and output per request).
struct TokenHistogram {
  static constexpr std::array<double, 14> kBounds = {1,   8,    16,   32,   64,   128,   256,
                                                     512, 1024, 2048, 4096, 8192, 16384, 65536};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};
  double sum = 0;
  void record(std::uint64_t n) {
    std::size_t i = 0;
    const double v = static_cast<double>(n);
    while (i < kBounds.size() && v > kBounds[i]) ++i;
    counts[i] += 1;
    sum += v;
  }
  void add(const TokenHistogram& o) {
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
    sum += o.sum;
  }
};

}  // namespace sluice::flowcontrol
