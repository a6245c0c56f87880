#include "scheduling/plugins/context_length_aware.h"

#include <algorithm>
#include <charconv>

namespace sluice::scheduling {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::uint64_t> parse_bound(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);  // as Go's Atoi
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ContextRange> parse_context_range(std::string_view text) {
  const auto dash = text.find('-');
  // Exactly one '-': "a-b-c" and negative bounds are malformed, as llm-d's.
  if (dash == std::string_view::npos || text.find('-', dash + 1) != std::string_view::npos)
    return std::nullopt;
  auto lo = parse_bound(text.substr(0, dash));
  auto hi = parse_bound(text.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return ContextRange{*lo, *hi};
}

double context_range_score(std::uint64_t length, ContextRange r) {
  constexpr double kMaxFallback = 0.3;
  if (length >= r.min && length <= r.max) {
    const double width = static_cast<double>(r.max - r.min);
    if (width == 0) return 1.0;
    const double width_score = 1.0 / (1.0 + width / 10000.0);
    const double position = static_cast<double>(r.max - length) / width;
    return kMaxFallback + (0.7 * width_score + 0.3 * position) * (1.0 - kMaxFallback);
  }
  const std::uint64_t distance = length > r.max ? length - r.max : r.min - length;
  return kMaxFallback / (1.0 + static_cast<double>(distance) / 1000.0);
}

ContextLengthAware::LabelRead ContextLengthAware::read_label(const Endpoint& e) const {
  auto it = e.labels.find(label_);
  if (it == e.labels.end()) return {};
  return {0, true, parse_context_range(it->second)};
}

void ContextLengthAware::filter(CycleState& cycle, const Request& request,
                                std::vector<const Endpoint*>& candidates) {
  if (!enable_filtering_) return;
  const std::uint64_t length = request.input_tokens;
  const std::uint64_t stamp = ++filter_calls_;
  cycle.put(filtered_key_, stamp);
  std::erase_if(candidates, [&](const Endpoint* e) {
    if (e->index >= by_slot_.size()) by_slot_.resize(e->index + 1);
    LabelRead& read = by_slot_[e->index];
    read = read_label(*e);
    read.stamp = stamp;
    if (!read.labelled) return false;  // no label: any length
    return !read.range || length < read.range->min || length > read.range->max;
  });
}

void ContextLengthAware::score(CycleState& cycle, const Request& request,
                               std::span<const Endpoint* const> candidates,
                               std::span<double> scores) {
  const std::uint64_t length = request.input_tokens;
  const std::uint64_t* filtered = cycle.get(filtered_key_);
  const std::uint64_t stamp = filtered && *filtered == filter_calls_ ? *filtered : 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::uint32_t slot = candidates[i]->index;
    const bool cached = stamp && slot < by_slot_.size() && by_slot_[slot].stamp == stamp;
    const LabelRead read = cached ? by_slot_[slot] : read_label(*candidates[i]);
    if (!read.labelled)
      scores[i] = 0.5;
    else
      scores[i] = read.range ? context_range_score(length, *read.range) : 0.0;
  }
}

}  // namespace sluice::scheduling
