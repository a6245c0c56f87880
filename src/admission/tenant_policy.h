// Admission's tenant step, once the body is parsed: what the request's
// tenant may do (auth/tenants.h). A pure decision (models, objective,
// max_tokens, and for passthrough whether an unread body can be held to
// the policy at all), then the caller takes the tenant's concurrency
// permit (shared state, proxy/tenant_load.h), then settle_tenant_flow
// gives the request its objective and flow. The quota step of issue 41,
// item 2 has the same shape: decide, take from shared state, settle.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "admission/request.h"
#include "auth/tenants.h"

namespace sluice::admission {

// What the tenant's policy decided for a request it let go on.
struct TenantDecision {
  bool applies = false;  // the request is held to a tenant's policy
  // The objective it runs under: the token's, else the header's, else the
  // tenant's default; clamped to what it may use ("": none, priority 0).
  std::string objective;
  // > 0: the caller holds one of the tenant's maxConcurrency permits
  // before settle_tenant_flow (none left: tenant_concurrency_refused).
  std::uint32_t max_concurrency = 0;
};

// In order: a passthrough request of a tenant limited by model or
// max_tokens (403 passthrough-not-allowed: its body is not read), the
// model (403 model-not-allowed), the objective (clamped, or 403
// objective-not-allowed), the max_tokens ceiling over every output-token
// limit of the body (r.head.body rewritten and r.body->max_tokens lowered,
// or 400 max-tokens-exceeded). A request under no policy goes on
// untouched (out.applies false). Needs r.body.
Verdict check_tenant_policy(const auth::Tenants& tenants, Request& r, TenantDecision& out);

// 429 tenant-concurrency-limit: `tenant` has `limit` requests in flight.
flowcontrol::ErrorAnswer tenant_concurrency_refused(std::string_view tenant, std::uint32_t limit);

// The decision applied: the objective, and the flow (the tenant's own, or
// the sub-flow the request names if the tenant may choose it). Nothing
// without a policy.
void settle_tenant_flow(Request& r, TenantDecision& d);

}  // namespace sluice::admission
