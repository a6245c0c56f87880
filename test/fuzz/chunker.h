// Splits a fuzz input into reads of varying size, the way bytes arrive from
// a socket: the first input byte picks the pattern (0: one read of all of
// it; n > 0: reads of 1..n bytes, sizes from a small PRNG seeded by n), so
// the fuzzer explores parser states that only a split at an odd place
// reaches (inside a chunk-size line, between CR and LF, mid-field).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::fuzz {

class Chunker {
 public:
  // `data` still holds the selector byte; it is not part of the stream.
  Chunker(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return;
    max_ = data[0];
    state_ = 0x9E3779B9u ^ max_;
    rest_ = std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1);
  }

  bool done() const { return rest_.empty(); }
  std::string_view stream() const { return rest_; }

  // The next read (empty once everything was handed out).
  std::string_view next() {
    std::size_t n = rest_.size();
    if (max_ != 0) {
      state_ ^= state_ << 13;
      state_ ^= state_ >> 17;
      state_ ^= state_ << 5;
      n = std::min<std::size_t>(n, 1 + state_ % max_);
    }
    std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }

 private:
  std::string_view rest_;
  std::uint32_t max_ = 0;
  std::uint32_t state_ = 0;
};

}  // namespace sluice::fuzz
