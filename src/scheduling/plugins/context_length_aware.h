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
  void attach(const PoolView* view) override { reads_.attach(view); }

  const std::string& label() const { return label_; }
  bool filtering() const { return enable_filtering_; }

 private:
  // What an endpoint's label says, kept by slot until its labels change:
  // the filter and the scorer of every cycle read it without a map lookup
  // or a parse per endpoint.
  struct LabelRead {
    bool labelled = false;
    std::optional<ScoredRange> range;
  };
  LabelRead read_label(const Endpoint& e) const;
  // The value of a candidate: found in this cycle's pass, else read.
  const LabelRead& label_of(const LabelCache<LabelRead>::Pass& pass, const Endpoint* e) {
    if (const LabelRead* r = pass.find(e)) return *r;
    return reads_.get(*e, [this](const Endpoint& x) { return read_label(x); });
  }
  LabelCache<LabelRead>::Pass pass() {
    return reads_.pass([this](const Endpoint& x) { return read_label(x); });
  }

  std::string label_;
  bool enable_filtering_;
  LabelCache<LabelRead> reads_;
};

}  // namespace sluice::scheduling
