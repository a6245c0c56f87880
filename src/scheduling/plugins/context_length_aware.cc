#include "scheduling/plugins/context_length_aware.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>

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

namespace {

constexpr double kMaxFallback = 0.3;

// Whether `length` is in the row's range, without a branch.
inline bool in_range(std::uint64_t length, const RangeRow& r) {
  return (static_cast<unsigned>(length >= r.min) & static_cast<unsigned>(length <= r.max)) != 0;
}

// The score out of range: 0 for a label that does not parse (min > max),
// else 0.3 / (1 + distance / 1000), the distance to the nearer bound.
inline double out_of_range_score(std::uint64_t length, const RangeRow& r) {
  if (r.min > r.max) return 0.0;
  const std::uint64_t distance = length > r.max ? length - r.max : r.min - length;
  return kMaxFallback / (1.0 + static_cast<double>(distance) / 1000.0);
}

}  // namespace

RangeRow range_row(const std::optional<ScoredRange>& range, bool labelled) {
  if (!labelled) return {0, std::numeric_limits<std::uint64_t>::max(), 0.5, 0.0};
  if (!range) return {1, 0, 0.0, 0.0};
  return {range->range.min, range->range.max, range->base, range->per_token};
}

double range_row_score(std::uint64_t length, const RangeRow& r) {
  if (in_range(length, r)) return r.base + r.per_token * static_cast<double>(r.max - length);
  return out_of_range_score(length, r);
}

RangeRow ContextLengthAware::read_label(const Endpoint& e) const {
  auto it = e.labels.find(label_);
  if (it == e.labels.end()) return range_row(std::nullopt, false);
  const auto range = parse_context_range(it->second);
  return range_row(range ? std::optional<ScoredRange>(prepare_range(*range)) : std::nullopt, true);
}

void ContextLengthAware::group() {
  const auto rows = reads_.pass([this](const Endpoint& x) { return read_label(x); });
  if (grouped_ && grouped_epoch_ == view_->labels_epoch && ids_.size() == view_->size) return;
  // Rows compared by their bits (the same label gives the same row).
  using Key = std::array<std::uint64_t, 4>;
  std::map<Key, std::uint32_t> seen;
  distinct_.clear();
  ids_.resize(view_->size);
  for (std::size_t p = 0; p < view_->size; ++p) {
    const RangeRow& r = rows.rows[p];
    Key k{r.min, r.max, 0, 0};
    std::memcpy(&k[2], &r.base, sizeof(double));
    std::memcpy(&k[3], &r.per_token, sizeof(double));
    auto [it, added] = seen.try_emplace(k, static_cast<std::uint32_t>(distinct_.size()));
    if (added) distinct_.push_back(r);
    ids_[p] = it->second;
  }
  keep_.resize(distinct_.size());
  score_.resize(distinct_.size());
  grouped_epoch_ = view_->labels_epoch;
  grouped_ = true;
  table_.valid = false;
}

ContextLengthAware::Table ContextLengthAware::table(std::uint64_t length) {
  if (!view_ || view_->size == 0) return {};
  group();
  if (!table_.valid || table_.length != length || table_.epoch != grouped_epoch_) {
    // The out-of-range score (a division) only for the ranges out of range.
    for (std::size_t d = 0; d < distinct_.size(); ++d) {
      const RangeRow& r = distinct_[d];
      keep_[d] = in_range(length, r);
      score_[d] = keep_[d] ? r.base + r.per_token * static_cast<double>(r.max - length)
                           : out_of_range_score(length, r);
    }
    table_ = {true, length, grouped_epoch_};
  }
  return {reinterpret_cast<std::uintptr_t>(view_->base), view_->size * sizeof(Endpoint),
          ids_.data(), keep_.data(), score_.data()};
}

void ContextLengthAware::filter(CycleState&, const Request& request,
                                std::vector<const Endpoint*>& candidates) {
  if (!enable_filtering_) return;
  const std::uint64_t length = request.input_tokens;
  const Table t = table(length);
  const std::size_t n = candidates.size();
  const Endpoint** cand = candidates.data();
  std::size_t kept = 0;
  std::size_t i = 0;
  // The view's candidates: each written, then kept or overwritten (no
  // branch). A candidate outside the view ends the loop: it and the rest
  // read their rows the slow way.
  for (; i < n; ++i) {
    const Endpoint* e = cand[i];
    const std::uintptr_t d = reinterpret_cast<std::uintptr_t>(e) - t.base;
    if (d >= t.bytes) [[unlikely]]
      break;
    cand[kept] = e;
    kept += t.keep[t.ids[d / sizeof(Endpoint)]];
  }
  for (; i < n; ++i) {
    const Endpoint* e = cand[i];
    cand[kept] = e;
    kept += in_range(length, row_of(*e));
  }
  candidates.resize(kept);
}

void ContextLengthAware::score(CycleState&, const Request& request,
                               std::span<const Endpoint* const> candidates,
                               std::span<double> scores) {
  const std::uint64_t length = request.input_tokens;
  // The filter's table when it ran before in this cycle (same length).
  const Table t = table(length);
  const std::size_t n = candidates.size();
  const Endpoint* const* cand = candidates.data();
  double* out = scores.data();
  std::size_t i = 0;
  for (; i < n; ++i) {  // as the filter's
    const std::uintptr_t d = reinterpret_cast<std::uintptr_t>(cand[i]) - t.base;
    if (d >= t.bytes) [[unlikely]]
      break;
    out[i] = t.score[t.ids[d / sizeof(Endpoint)]];
  }
  for (; i < n; ++i) out[i] = range_row_score(length, row_of(*cand[i]));
}

}  // namespace sluice::scheduling
