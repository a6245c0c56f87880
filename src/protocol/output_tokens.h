// Counts the output tokens of a response as it is relayed, for fairness
// charging (VTC) without buffering the body: the number of SSE token events
// of a stream, or the usage.completion_tokens the model server reports
// (authoritative when present, in a plain answer or a stream's usage chunk).
// Matches split across reads are found through a small carry-over.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::protocol {

class OutputTokenCounter {
 public:
  void reset();
  void feed(std::string_view data);
  std::uint64_t tokens() const { return usage_seen_ ? usage_ : events_; }

 private:
  static constexpr std::size_t kCarry = 64;
  std::string window_;  // carry-over + current data
  std::uint64_t events_ = 0;
  std::uint64_t usage_ = 0;
  bool usage_seen_ = false;
};

}  // namespace sluice::protocol
