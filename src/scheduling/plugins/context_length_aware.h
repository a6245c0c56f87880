// context-length-aware (llm-d): a filter and a scorer by the request's
// context length (its input tokens: sluice's estimate, characters / 4, as
// llm-d's tokenizer-free `estimate` backend) against the range an endpoint
// serves, read from its label `label` (default
// llm-d.ai/context-length-range) as "min-max" (non-negative integers,
// min <= max, both inclusive).
//
// Filter (only with enableFiltering: true): keeps endpoints whose range
// holds the length, and endpoints without the label (they take any
// length); drops those whose label does not parse.
// Scorer: no label 0.5; an unparseable label 0; in range
// 0.3 + 0.7 x (0.7 / (1 + width / 10000) + 0.3 x (max - length) / width)
// (1 for a zero-width range), so a tight range with headroom wins; out of
// range 0.3 / (1 + distance / 1000), the distance to the nearer bound, so
// an in-range endpoint always beats an out-of-range one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduling/plugins/label_cache.h"
#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

struct ContextRange {
  std::uint64_t min = 0;
  std::uint64_t max = 0;
};

// "min-max" (spaces around each bound allowed), or nullopt.
std::optional<ContextRange> parse_context_range(std::string_view text);
// A range with what its in-range score needs that does not depend on the
// request, computed once (when the label is read), not per request:
// in range, 0.3 + 0.49 x widthScore + 0.21 x (max - length) / width.
struct ScoredRange {
  ContextRange range;
  double base = 0;       // 0.3 + 0.49 x widthScore (1 for a zero width)
  double per_token = 0;  // 0.21 / width (0 for a zero width)
};
ScoredRange prepare_range(ContextRange range);
double prepared_range_score(std::uint64_t length, const ScoredRange& r);
// The score of an endpoint serving `range` for a request of `length` tokens.
double context_range_score(std::uint64_t length, ContextRange range);

// What an endpoint's label says, as the filter and the scorer read it, kept
// per endpoint until its labels change: flat, so that the filter's keep is
// two comparisons and a score in range one multiply-add, with no flag.
//   in range (min <= length <= max): base + per_token x (max - length);
//   a range:   prepare_range's base and per_token;
//   no label:  0..UINT64_MAX, base 0.5, per_token 0 (in range at any
//              length, and 0.5 + 0 x (max - length) is 0.5);
//   a label that does not parse: min 1 > max 0 (never in range; out of
//              range it scores 0, see range_row_score).
struct RangeRow {
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  double base = 0;
  double per_token = 0;
};
RangeRow range_row(const std::optional<ScoredRange>& range, bool labelled);
// The score of `row` for a request of `length` tokens.
double range_row_score(std::uint64_t length, const RangeRow& row);

class ContextLengthAware final : public Plugin, public Filter, public Scorer, public PoolViewer {
 public:
  static constexpr std::string_view kType = "context-length-aware";
  static constexpr std::string_view kDefaultLabel = "llm-d.ai/context-length-range";
  ContextLengthAware(std::string label, bool enable_filtering)
      : label_(std::move(label)), enable_filtering_(enable_filtering) {}
  std::string_view type() const override { return kType; }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) override;
  std::uint32_t columns_read() const override { return 0; }
  void attach(const PoolView* view) override {
    reads_.attach(view);
    view_ = view;
    grouped_ = false;
    table_ = {};
  }

  const std::string& label() const { return label_; }
  bool filtering() const { return enable_filtering_; }

 private:
  // A request length's verdicts and scores for the view's endpoints: an
  // endpoint's are those of its distinct range, keep[ids[position]] and
  // score[ids[position]], its position (address - base) / sizeof(Endpoint)
  // when the difference is below `bytes` (never when not attached).
  struct Table {
    std::uintptr_t base = 0;
    std::size_t bytes = 0;  // the view's size x sizeof(Endpoint)
    const std::uint32_t* ids = nullptr;
    const std::uint8_t* keep = nullptr;
    const double* score = nullptr;
  };
  Table table(std::uint64_t length);
  void group();
  RangeRow read_label(const Endpoint& e) const;
  RangeRow row_of(const Endpoint& e) {
    return reads_.get(e, [this](const Endpoint& x) { return read_label(x); });
  }

  std::string label_;
  bool enable_filtering_;
  LabelCache<RangeRow> reads_;
  const PoolView* view_ = nullptr;
  // The view's endpoints grouped by row, once per labels epoch: the
  // distinct rows, and each position's among them (a pool has few
  // distinct ranges: a cycle decides and scores each once, then reads one
  // number a candidate).
  bool grouped_ = false;
  std::uint64_t grouped_epoch_ = 0;
  std::vector<RangeRow> distinct_;
  std::vector<std::uint32_t> ids_;
  // keep_ and score_: the distinct rows' verdicts and scores for the
  // request length table_.length (the filter's, then the same cycle's
  // scorer's) and the grouping of epoch table_.epoch.
  struct Decided {
    bool valid = false;
    std::uint64_t length = 0;
    std::uint64_t epoch = 0;
  };
  Decided table_;
  std::vector<std::uint8_t> keep_;
  std::vector<double> score_;
};

}  // namespace sluice::scheduling
