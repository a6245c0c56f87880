#include "auth/tenants.h"

#include <algorithm>

namespace sluice::auth {

namespace {

TenantPolicy resolve(const config::TenantSpec& t,
                     const std::map<std::string, int, std::less<>>& pr) {
  TenantPolicy p;
  p.id = t.id;
  // The config reader checked that every name is an objective.
  for (const auto& o : t.objectives) p.objectives.emplace(o, pr.at(o));
  if (!t.max_objective.empty()) {
    p.max_objective = t.max_objective;
    p.max_priority = pr.at(t.max_objective);
  }
  p.refuse_above_max_objective = t.refuse_above_max_objective;
  p.default_objective = t.default_objective;
  for (const auto& m : t.models) {
    if (!m.empty() && m.back() == '*')
      p.model_prefixes.push_back(m.substr(0, m.size() - 1));
    else
      p.models.insert(m);
  }
  p.any_model = t.models.empty();
  p.max_tokens = t.max_tokens;
  p.refuse_above_max_tokens = t.refuse_above_max_tokens;
  p.max_concurrency = t.max_concurrency;
  for (const auto& s : t.subflows) {
    if (s == "*")
      p.any_subflow = true;
    else
      p.subflows.insert(s);
  }
  return p;
}

}  // namespace

Tenants::Tenants(const config::Config& c) {
  for (const auto& o : c.objectives) priorities_.emplace(o.name, o.priority);
  for (const auto& t : c.tenants) {
    if (t.id == "*")
      default_ = std::make_unique<TenantPolicy>(resolve(t, priorities_));
    else
      by_id_.emplace(t.id, resolve(t, priorities_));
  }
}

const TenantPolicy* Tenants::find(std::string_view tenant) const {
  auto it = by_id_.find(std::string(tenant));
  if (it != by_id_.end()) return &it->second;
  return default_.get();
}

int Tenants::priority_of(std::string_view objective) const {
  auto it = priorities_.find(objective);
  return it == priorities_.end() ? 0 : it->second;
}

ObjectiveDecision Tenants::decide_objective(const TenantPolicy& p,
                                            std::string_view requested) const {
  ObjectiveDecision d;
  d.objective = requested.empty() ? p.default_objective : std::string(requested);
  const int wanted = priority_of(d.objective);
  const bool listed = p.objectives.empty() || p.objectives.count(d.objective);
  const bool under_ceiling = !p.max_priority || wanted <= *p.max_priority;
  if (listed && under_ceiling) return d;
  // Named explicitly and refused by the policy: 403. With nothing named,
  // the tenant's own default is never refused; it is lowered like a clamp.
  const bool refuse = p.refuse_above_max_objective && !requested.empty();
  if (refuse) {
    d.refused = true;
    return d;
  }
  d.clamped = true;
  // The highest objective the tenant may use at or below the one asked for;
  // failing that, its lowest one.
  const std::string* best = nullptr;
  int best_priority = 0;
  const std::string* lowest = nullptr;
  int lowest_priority = 0;
  auto consider = [&](const std::string& name, int pri) {
    if (p.max_priority && pri > *p.max_priority) return;
    if (pri <= wanted && (!best || pri > best_priority)) best = &name, best_priority = pri;
    if (!lowest || pri < lowest_priority) lowest = &name, lowest_priority = pri;
  };
  if (!p.objectives.empty()) {
    for (const auto& [name, pri] : p.objectives) consider(name, pri);
  } else {
    for (const auto& [name, pri] : priorities_) consider(name, pri);
  }
  if (best)
    d.objective = *best;
  else if (lowest)
    d.objective = *lowest;
  else
    d.objective = p.max_objective;
  return d;
}

namespace {
bool in(const std::unordered_set<std::string>& exact, const std::vector<std::string>& prefixes,
        std::string_view model) {
  if (exact.count(std::string(model))) return true;
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& pre) { return model.substr(0, pre.size()) == pre; });
}
}  // namespace

bool Tenants::model_allowed(const TenantPolicy& p, std::string_view model) {
  if (!p.any_model && !in(p.models, p.model_prefixes, model)) return false;
  return p.key_any_model || in(p.key_models, p.key_model_prefixes, model);
}

TenantPolicy Tenants::scoped(const TenantPolicy* base, std::string_view tenant,
                             const std::vector<std::string>* models, std::string_view max_objective,
                             std::uint64_t max_tokens) const {
  TenantPolicy p = base ? *base : TenantPolicy{};
  p.id = std::string(tenant);
  if (models) {
    for (const auto& m : *models) {
      if (!m.empty() && m.back() == '*')
        p.key_model_prefixes.push_back(m.substr(0, m.size() - 1));
      else
        p.key_models.insert(m);
    }
  }
  p.key_any_model = models == nullptr;
  if (!max_objective.empty()) {
    const bool known = priorities_.count(max_objective) > 0;
    const int pri = priority_of(max_objective);
    if (!p.max_priority || pri < *p.max_priority) {
      p.max_priority = pri;
      p.max_objective = known ? std::string(max_objective) : std::string();
    }
  }
  if (max_tokens > 0 && (p.max_tokens == 0 || max_tokens < p.max_tokens)) p.max_tokens = max_tokens;
  return p;
}

std::string Tenants::flow_for(const TenantPolicy* p, std::string_view tenant,
                              std::string_view subflow) {
  std::string flow(tenant);
  // A sub-flow is one name: "acme/ui" (or "x/y" under "*") is none.
  if (!p || subflow.empty() || subflow.find('/') != std::string_view::npos) return flow;
  if (p->any_subflow || p->subflows.count(std::string(subflow))) {
    flow += '/';
    flow += subflow;
  }
  return flow;
}

}  // namespace sluice::auth
