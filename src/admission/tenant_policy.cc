#include "admission/tenant_policy.h"

#include <algorithm>
#include <array>
#include <span>

#include "admission/identity.h"
#include "protocol/engine_priority.h"

namespace sluice::admission {

namespace {

using flowcontrol::client_error;

flowcontrol::ErrorAnswer refused(int status, std::string_view code, std::string_view reason,
                                 const std::string& message) {
  auto a = client_error(status, code, message);
  a.reason = reason;
  return a;
}

// The tenant's max_tokens ceiling holds for every output-token limit the
// body carries (max_tokens, max_completion_tokens, max_output_tokens: each
// engine reads a different one first), every occurrence counted. Above it:
// 400, or each limit present rewritten to at most the ceiling; a body that
// names none (or only null) gets the ceiling, in the member its route's
// engines read.
Verdict apply_max_tokens(const auth::TenantPolicy& p, Request& r) {
  if (p.max_tokens == 0 || r.route == protocol::Route::kEmbeddings) return {};
  protocol::OpenAIRequest& req = *r.body;
  const auto ceiling = static_cast<std::int64_t>(p.max_tokens);
  const auto& limits = req.output_limits;
  bool rewrite = !req.max_tokens;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    rewrite = rewrite || limits[i].has_null || limits[i].max > ceiling;
    if (limits[i].max > ceiling && p.refuse_above_max_tokens)
      return Verdict::refuse(
          refused(400, "max_tokens_exceeded", "max-tokens-exceeded",
                  std::string(protocol::kOutputLimitKeys[i]) + " " + std::to_string(limits[i].max) +
                      " is above the tenant's ceiling of " + std::to_string(ceiling)));
  }
  if (!rewrite) return {};
  // Each key present or null, and the route's default when none is present.
  std::array<protocol::Member, protocol::kOutputLimitKeys.size() + 1> put;
  std::size_t n = 0;
  for (std::size_t i = 0; i < limits.size(); ++i)
    if (limits[i].present || limits[i].has_null)
      put[n++] = {protocol::kOutputLimitKeys[i],
                  limits[i].present ? std::min(limits[i].max, ceiling) : ceiling};
  if (!req.max_tokens)
    put[n++] = {r.route == protocol::Route::kResponses ? "max_output_tokens" : "max_tokens",
                ceiling};
  // Each once: a key that was null and is written as the route's default.
  std::sort(put.begin(), put.begin() + static_cast<std::ptrdiff_t>(n),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  n = static_cast<std::size_t>(
      std::unique(put.begin(), put.begin() + static_cast<std::ptrdiff_t>(n),
                  [](const auto& a, const auto& b) { return a.key == b.key; }) -
      put.begin());
  r.head.body = protocol::body_with_members(r.head.body, protocol::kOutputLimitKeys,
                                            std::span(put.data(), n));
  req.max_tokens = req.max_tokens ? std::min(*req.max_tokens, ceiling) : ceiling;
  return {};
}

}  // namespace

// The tenant's policy on a request: its model, its objective (the token's,
// else the header's, else the tenant's default; clamped or refused above
// what it may use), its max_tokens ceiling; its concurrency is the
// caller's to take.
Verdict check_tenant_policy(const auth::Tenants& tenants, Request& r, TenantDecision& out) {
  out.applies = under_tenant_policy(r.identity);
  if (!out.applies) return {};
  const auth::TenantPolicy* p = r.identity.policy;
  const std::string& tenant = r.identity.tenant;
  if (p && r.route == protocol::Route::kPassthrough && (p->restricts_models() || p->max_tokens > 0))
    return Verdict::refuse(refused(
        403, "passthrough_not_allowed", "passthrough-not-allowed",
        "tenant '" + tenant +
            "' is limited by model or max_tokens, which an unparsed request cannot be held to; "
            "use an OpenAI path (" +
            r.head.target + " is not one)"));
  const std::string_view asked = !r.identity.objective.empty()
                                     ? std::string_view(r.identity.objective)
                                     : std::string_view(r.head.objective);
  if (p && !auth::Tenants::model_allowed(*p, r.body->model))
    return Verdict::refuse(
        refused(403, "model_not_allowed", "model-not-allowed",
                "tenant '" + tenant + "' may not use model '" + r.body->model + "'"));
  out.objective.assign(asked);
  out.max_concurrency = 0;
  if (!p) return {};
  auto d = tenants.decide_objective(*p, asked);
  if (d.refused)
    return Verdict::refuse(
        refused(403, "objective_not_allowed", "objective-not-allowed",
                "tenant '" + tenant + "' may not use objective '" + std::string(asked) + "'"));
  out.objective = std::move(d.objective);
  out.max_concurrency = p->max_concurrency;
  return apply_max_tokens(*p, r);
}

flowcontrol::ErrorAnswer tenant_concurrency_refused(std::string_view tenant, std::uint32_t limit) {
  auto a = refused(429, "tenant_concurrency_limit", "tenant-concurrency-limit",
                   "tenant '" + std::string(tenant) + "' has " + std::to_string(limit) +
                       " requests in flight already, its limit; retry when one ends");
  a.retry_after_seconds = 1;
  return a;
}

// The sub-flow asked for: the fairness id of an authenticated request
// ("ui"), what follows the tenant in a trusted proxy's ("acme/ui").
void settle_tenant_flow(Request& r, TenantDecision& d) {
  if (!d.applies) return;
  r.head.objective = std::move(d.objective);
  std::string_view subflow = r.head.fairness_id;
  if (r.identity.source == auth::Source::kTrustedProxy) {
    const auto slash = subflow.find('/');
    subflow = slash == std::string_view::npos ? std::string_view() : subflow.substr(slash + 1);
  }
  r.head.fairness_id = auth::Tenants::flow_for(r.identity.policy, r.identity.tenant, subflow);
}

}  // namespace sluice::admission
