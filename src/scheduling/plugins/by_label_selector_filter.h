// by-label-selector (also llm-d's label-selector-filter): keeps endpoints
// matching a Kubernetes label selector: every `matchLabels` pair, and every
// `matchExpressions` entry {key, operator: In | NotIn | Exists |
// DoesNotExist, values}. An empty selector keeps everything.
#pragma once

#include <string>
#include <vector>

#include "scheduling/plugins/label_cache.h"
#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;
  bool matches(const Labels& labels) const;
};

class ByLabelSelectorFilter final : public Plugin, public Filter, public PoolViewer {
 public:
  ByLabelSelectorFilter(std::string_view type, std::vector<LabelRequirement> requirements)
      : type_(type), requirements_(std::move(requirements)) {}
  std::string_view type() const override { return type_; }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;
  void attach(const PoolView* view) override { verdicts_.attach(view); }

 private:
  std::string_view type_;
  std::vector<LabelRequirement> requirements_;
  LabelCache<std::uint8_t> verdicts_;  // 1: kept
};

// Reads matchLabels / matchExpressions.
std::vector<LabelRequirement> read_label_selector(PluginParams& params);

}  // namespace sluice::scheduling
