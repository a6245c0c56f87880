#include "protocol/output_tokens.h"

#include <algorithm>

namespace sluice::protocol {

void OutputTokenCounter::reset() {
  window_.clear();
  events_ = 0;
  usage_ = 0;
  usage_seen_ = false;
  prompt_ = 0;
  prompt_seen_ = false;
}

namespace {

void take_usage(std::string_view s, std::string_view key, std::uint64_t& value, bool& seen) {
  for (std::size_t p = s.find(key); p != std::string_view::npos; p = s.find(key, p + 1)) {
    std::size_t i = p + key.size();
    while (i < s.size() && s[i] == ' ') ++i;
    std::uint64_t v = 0;
    std::size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 20)
      v = v * 10 + static_cast<std::uint64_t>(s[i++] - '0'), ++digits;
    if (digits == 0 || digits > 19 || i >= s.size()) continue;  // not a count, or incomplete
    value = std::max(value, v);
    seen = true;
  }
}

}  // namespace

void OutputTokenCounter::feed(std::string_view data) {
  const std::size_t carried = window_.size();
  window_.append(data.data(), data.size());
  const std::string_view s = window_;

  // SSE events: "data: " plus the first byte of the payload (to tell "[DONE]"
  // apart). An event is counted once its 7th byte is here and if that byte
  // was not already here last time (then it was counted last time).
  constexpr std::string_view kData = "data: ";
  for (std::size_t p = s.find(kData); p != std::string_view::npos; p = s.find(kData, p + 1)) {
    const std::size_t end = p + kData.size() + 1;
    if (end > s.size()) break;
    if (end <= carried) continue;
    if (s[p + kData.size()] != '[') events_ += 1;
  }

  // "completion_tokens": N (and "prompt_tokens": N), taken once the number
  // is complete (a non-digit follows). Seeing the same one twice is
  // harmless: the largest wins. A negative value, one that is not a number
  // or has more than 19 digits is not usage: the events count stands.
  // The Responses API reports them as output_tokens and input_tokens.
  take_usage(s, "\"completion_tokens\":", usage_, usage_seen_);
  take_usage(s, "\"output_tokens\":", usage_, usage_seen_);
  take_usage(s, "\"prompt_tokens\":", prompt_, prompt_seen_);
  take_usage(s, "\"input_tokens\":", prompt_, prompt_seen_);

  if (window_.size() > kCarry) window_.erase(0, window_.size() - kCarry);
}

}  // namespace sluice::protocol
