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

ScoredRange prepare_range(ContextRange r) {
  constexpr double kMaxFallback = 0.3;
  ScoredRange s{r, 1.0, 0.0};
  const double width = static_cast<double>(r.max - r.min);
  if (width == 0) return s;
  // kMaxFallback + (0.7 x widthScore + 0.3 x position) x (1 - kMaxFallback)
  // with position = (max - length) / width, split into what the range
  // fixes and what the length adds.
  const double width_score = 1.0 / (1.0 + width / 10000.0);
  s.base = kMaxFallback + 0.7 * width_score * (1.0 - kMaxFallback);
  s.per_token = 0.3 * (1.0 - kMaxFallback) / width;
  return s;
}

double prepared_range_score(std::uint64_t length, const ScoredRange& s) {
  constexpr double kMaxFallback = 0.3;
  const ContextRange r = s.range;
  if (length >= r.min && length <= r.max)
    return s.base + s.per_token * static_cast<double>(r.max - length);
  const std::uint64_t distance = length > r.max ? length - r.max : r.min - length;
  return kMaxFallback / (1.0 + static_cast<double>(distance) / 1000.0);
}

double context_range_score(std::uint64_t length, ContextRange r) {
  return prepared_range_score(length, prepare_range(r));
}

ContextLengthAware::LabelRead ContextLengthAware::read_label(const Endpoint& e) const {
  auto it = e.labels.find(label_);
  if (it == e.labels.end()) return {};
  const auto range = parse_context_range(it->second);
  if (!range) return {true, std::nullopt};
  return {true, prepare_range(*range)};
}

void ContextLengthAware::filter(CycleState&, const Request& request,
                                std::vector<const Endpoint*>& candidates) {
  if (!enable_filtering_) return;
  const std::uint64_t length = request.input_tokens;
  auto keeps = [length](const LabelRead& r) {
    // No label: any length.
    return !r.labelled || (r.range && length >= r.range->range.min && length <= r.range->range.max);
  };
  reads_.keep_if(
      candidates, [this](const Endpoint& x) { return read_label(x); }, keeps);
}

void ContextLengthAware::score(CycleState&, const Request& request,
                               std::span<const Endpoint* const> candidates,
                               std::span<double> scores) {
  const std::uint64_t length = request.input_tokens;
  const std::size_t n = candidates.size();
  const Endpoint* const* cand = candidates.data();
  double* out = scores.data();
  auto score_of = [length](const LabelRead& r) {
    if (!r.labelled) return 0.5;
    return r.range ? prepared_range_score(length, *r.range) : 0.0;
  };
  const auto labels = pass();
  std::size_t i = 0;
  for (; i < n; ++i) {  // as the filter's: no call in the loop
    const LabelRead* r = labels.find(cand[i]);
    if (!r) [[unlikely]]
      break;
    out[i] = score_of(*r);
  }
  for (; i < n; ++i) out[i] = score_of(label_of(labels, cand[i]));
}

}  // namespace sluice::scheduling
