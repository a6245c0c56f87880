// Counts the output tokens of a response as it is relayed, for fairness
// charging (VTC) without buffering the body: the number of SSE token events
// of a stream, or the usage.completion_tokens the model server reports
// (authoritative when present, in a plain answer or a stream's usage chunk),
// and the usage's prompt_tokens for input-token quotas.
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
  // The usage's prompt_tokens, when the answer reported it.
  bool prompt_reported() const { return prompt_seen_; }
  std::uint64_t prompt_tokens() const { return prompt_; }

 private:
  static constexpr std::size_t kCarry = 64;
  std::string window_;  // carry-over + current data
  std::uint64_t events_ = 0;
  std::uint64_t usage_ = 0;
  bool usage_seen_ = false;
  std::uint64_t prompt_ = 0;
  bool prompt_seen_ = false;
};

}  // namespace sluice::protocol
