// by-label (llm-d): keeps endpoints whose label `label` has one of
// `validValues`; endpoints without the label are kept only if
// `allowsNoLabel`. prefill-filter and decode-filter are this filter on
// `llm-d.ai/role` (as llm-d): prefill keeps prefill, encode-prefill,
// prefill-decode, both and encode-prefill-decode, and drops endpoints
// without a role; decode keeps decode, prefill-decode, both and
// encode-prefill-decode, and endpoints without a role (a plain pool serves
// both phases).
#pragma once

#include <set>
#include <string>

#include "scheduling/plugins/label_cache.h"
#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

inline constexpr std::string_view kRoleLabel = "llm-d.ai/role";

class ByLabelFilter final : public Plugin, public Filter, public PoolViewer {
 public:
  ByLabelFilter(std::string_view type, std::string label, std::set<std::string, std::less<>> valid,
                bool allows_no_label)
      : type_(type),
        label_(std::move(label)),
        valid_(std::move(valid)),
        allows_no_label_(allows_no_label) {}
  std::string_view type() const override { return type_; }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;
  void attach(const PoolView* view) override { verdicts_.attach(view); }

  static std::unique_ptr<ByLabelFilter> prefill() {
    return std::make_unique<ByLabelFilter>(
        "prefill-filter", std::string(kRoleLabel),
        std::set<std::string, std::less<>>{"prefill", "encode-prefill", "prefill-decode", "both",
                                           "encode-prefill-decode"},
        false);
  }
  static std::unique_ptr<ByLabelFilter> decode() {
    return std::make_unique<ByLabelFilter>(
        "decode-filter", std::string(kRoleLabel),
        std::set<std::string, std::less<>>{"decode", "prefill-decode", "both",
                                           "encode-prefill-decode"},
        true);
  }

 private:
  bool keeps(const Endpoint& e) const;

  std::string_view type_;
  std::string label_;
  std::set<std::string, std::less<>> valid_;
  bool allows_no_label_;
  LabelCache<std::uint8_t> verdicts_;  // 1: kept
};

}  // namespace sluice::scheduling
