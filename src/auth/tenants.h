// What an authenticated tenant may do (config tenants:), resolved once per
// config: objectives against their priorities, models as exact names and
// prefixes. Immutable, shared by the I/O threads; the decisions below are
// pure functions of a policy and a request.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config/config.h"

namespace sluice::auth {

struct TenantPolicy {
  std::string id;  // "*" for the default policy
  // Allowed objectives (empty: any), with their priorities.
  std::map<std::string, int, std::less<>> objectives;
  std::optional<int> max_priority;  // the max objective's
  std::string max_objective;
  bool refuse_above_max_objective = false;
  std::string default_objective;
  std::unordered_set<std::string> models;  // exact
  std::vector<std::string> model_prefixes;
  bool any_model = true;
  // A scoped API key's own models, beside the tenant's: a model must be in
  // both (auth/api_keys.h KeyRecord).
  std::unordered_set<std::string> key_models;
  std::vector<std::string> key_model_prefixes;
  bool key_any_model = true;
  std::uint64_t max_tokens = 0;
  bool refuse_above_max_tokens = false;
  std::uint32_t max_concurrency = 0;
  std::unordered_set<std::string> subflows;
  bool any_subflow = false;
  bool restricts_models() const { return !any_model || !key_any_model; }
};

// The objective a request of this tenant runs under.
struct ObjectiveDecision {
  bool refused = false;   // 403 objective_not_allowed
  bool clamped = false;   // lowered to what the tenant may use
  std::string objective;  // "" = none (priority 0)
};

// Every tenant's policy, and the objectives' priorities.
class Tenants {
 public:
  Tenants() = default;
  explicit Tenants(const config::Config& c);

  // The tenant's policy, the default ("*") one, or null: no limits.
  const TenantPolicy* find(std::string_view tenant) const;
  bool empty() const { return by_id_.empty() && !default_; }

  // `requested` (the header's, or the token's; "" none) under `p`.
  ObjectiveDecision decide_objective(const TenantPolicy& p, std::string_view requested) const;
  static bool model_allowed(const TenantPolicy& p, std::string_view model);
  // `base` (null: no limits) narrowed by a scoped key's models, highest
  // objective and max_tokens: never beyond the tenant's own policy. An
  // objective that is not configured narrows to priority 0 (GIE's rule for
  // an unknown one).
  // `models` null: the tenant's (empty: none).
  TenantPolicy scoped(const TenantPolicy* base, std::string_view tenant,
                      const std::vector<std::string>* models, std::string_view max_objective,
                      std::uint64_t max_tokens) const;
  // The flow of a request of `tenant` that names `subflow` (its
  // fairness-id header, "" none): "<tenant>/<subflow>" if the policy lets
  // it choose that one, else the tenant's own flow.
  static std::string flow_for(const TenantPolicy* p, std::string_view tenant,
                              std::string_view subflow);

 private:
  int priority_of(std::string_view objective) const;  // unknown or "": 0, as in GIE

  std::unordered_map<std::string, TenantPolicy> by_id_;
  std::unique_ptr<TenantPolicy> default_;
  std::map<std::string, int, std::less<>> priorities_;
};

}  // namespace sluice::auth
