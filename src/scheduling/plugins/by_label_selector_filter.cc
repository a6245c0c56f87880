#include "scheduling/plugins/by_label_selector_filter.h"

#include <algorithm>

namespace sluice::scheduling {

bool LabelRequirement::matches(const Labels& labels) const {
  auto it = labels.find(key);
  const bool has = it != labels.end();
  switch (op) {
    case Op::kExists:
      return has;
    case Op::kDoesNotExist:
      return !has;
    case Op::kIn:
      return has && std::find(values.begin(), values.end(), it->second) != values.end();
    case Op::kNotIn:
      return !has || std::find(values.begin(), values.end(), it->second) == values.end();
  }
  return false;
}

void ByLabelSelectorFilter::filter(CycleState&, const Request&,
                                   std::vector<const Endpoint*>& candidates) {
  // The verdict is the endpoint's labels' alone: kept until they change,
  // and found by the candidate's address (see ByLabelFilter::filter).
  auto derive = [this](const Endpoint& x) -> std::uint8_t {
    for (const auto& r : requirements_)
      if (!r.matches(x.labels)) return 0;
    return 1;
  };
  verdicts_.keep_if(candidates, derive, [](std::uint8_t v) { return v != 0; });
}

std::vector<LabelRequirement> read_label_selector(PluginParams& params) {
  std::vector<LabelRequirement> out;
  if (auto m = params.string_map("matchLabels"))
    for (auto& [k, v] : *m) out.push_back(LabelRequirement{k, LabelRequirement::Op::kIn, {v}});
  YAML::Node exprs = params.take("matchExpressions");
  if (exprs) {
    if (!exprs.IsSequence()) params.fail("matchExpressions", "expected a list");
    for (std::size_t i = 0; i < exprs.size(); ++i) {
      const std::string idx = "matchExpressions[" + std::to_string(i) + "]";
      PluginParams e(exprs[i], params.source(), idx, exprs[i].Mark().line + 1);
      LabelRequirement r;
      auto key = e.string("key");
      if (!key || key->empty()) params.fail(idx + ".key", "is required");
      r.key = *key;
      const std::string op = e.string("operator").value_or("");
      if (op == "In")
        r.op = LabelRequirement::Op::kIn;
      else if (op == "NotIn")
        r.op = LabelRequirement::Op::kNotIn;
      else if (op == "Exists")
        r.op = LabelRequirement::Op::kExists;
      else if (op == "DoesNotExist")
        r.op = LabelRequirement::Op::kDoesNotExist;
      else
        params.fail(idx + ".operator",
                    "expected In, NotIn, Exists or DoesNotExist, got '" + op + "'");
      r.values = e.string_list("values").value_or(std::vector<std::string>{});
      if ((r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn) &&
          r.values.empty())
        params.fail(idx + ".values", "must not be empty for " + op);
      e.finish();
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace sluice::scheduling
