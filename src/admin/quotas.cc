// GET /admin/v1/quotas[?tenant=][&limit=]: each limit as it stands on this
// replica (used, held for requests in flight, remaining, when it resets);
// POST /admin/v1/quotas/{tenant}/reset: a tenant's windows count nothing
// from here (this replica's books; issue 41's fleet leases make it
// fleet-wide).
#include <string>

#include "admin/handlers.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

constexpr std::size_t kMaxRows = 10'000;

std::string_view measure_text(quota::Measure m) {
  switch (m) {
    case quota::Measure::kRequests:
      return "requests";
    case quota::Measure::kInputTokens:
      return "inputTokens";
    case quota::Measure::kOutputTokens:
      return "outputTokens";
    case quota::Measure::kTokens:
      return "tokens";
    case quota::Measure::kCost:
      return "cost";
  }
  return "tokens";
}

// `?tenant=` of a target ("" when absent); nullopt when it is not a valid
// steering value (a tenant id is one).
std::optional<std::string> tenant_param(const std::string& target) {
  const auto q = target.find('?');
  if (q == std::string::npos) return std::string();
  std::string_view query = std::string_view(target).substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.rfind("tenant=", 0) != 0) continue;
    const std::string_view v = kv.substr(7);
    if (!protocol::is_valid_steering_value(v, 256)) return std::nullopt;
    return std::string(v);
  }
  return std::string();
}

json row_json(const quota::Quotas::Row& r, quota::Millis now) {
  const auto& s = r.now;
  const std::uint64_t spent = s.used + s.held;
  json j{{r.key ? "key" : "tenant", r.id},
         {"name", r.def.name},
         {"measure", measure_text(r.def.measure)},
         {"limit", r.def.amount},
         {"used", s.used},
         {"reserved", s.held},
         {"remaining", spent >= s.amount ? 0 : s.amount - spent},
         {"resetsInMs", std::max<quota::Millis>(0, s.resets_at - now)},
         {"mode", r.def.shadow ? "shadow" : "enforce"},
         {"refused", s.refused},
         {"wouldRefuse", s.would_refuse}};
  if (r.def.period.calendar == quota::Calendar::kDay)
    j["calendar"] = "day";
  else if (r.def.period.calendar == quota::Calendar::kMonth)
    j["calendar"] = "month";
  else
    j["windowMs"] = r.def.period.window;
  if (!r.def.models.empty()) j["models"] = r.def.models;
  return j;
}

}  // namespace

void list_quotas(HandlerContext& hc, const Request& req, Respond respond) {
  const auto tenant = tenant_param(req.target);
  if (!tenant)
    return respond(error_reply(400, "invalid-tenant", "tenant must be a valid tenant id"));
  const auto limit = limit_param(req.target, 1000, kMaxRows);
  if (!limit)
    return respond(
        error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 10000"));
  const quota::Millis now = quota::unix_now_ms();
  const auto rows = hc.ctx.quotas.rows(*tenant, now, *limit);
  json out = json::array();
  for (const auto& r : rows) out.push_back(row_json(r, now));
  respond(AdminReply{200, out.dump(-1, ' ', false, kReplace)});
}

// {tenant}/reset
void reset_quota(HandlerContext& hc, const Request& req, Respond respond) {
  constexpr std::string_view kReset = "/reset";
  std::string_view p = req.param;
  if (p.size() <= kReset.size() || p.substr(p.size() - kReset.size()) != kReset)
    return respond(error_reply(404, "not-found", "POST /admin/v1/quotas/{tenant}/reset"));
  p.remove_suffix(kReset.size());
  if (!protocol::is_valid_steering_value(p, 256))
    return respond(error_reply(400, "invalid-tenant", "tenant must be a valid tenant id"));
  if (!hc.ctx.quotas.reset_tenant(p, !req.replicated)) {
    // No books of the tenant here: in a fleet the others may have some
    // (the reset is sent on when this answer is a success).
    if (req.replicated || hc.fleet())
      return respond(
          AdminReply{200, json{{"tenant", p}, {"reset", false}}.dump(-1, ' ', false, kReplace)});
    return respond(error_reply(404, "no-quota", "tenant '" + std::string(p) + "' has no quota"));
  }
  respond(AdminReply{200, json{{"tenant", p}, {"reset", true}}.dump(-1, ' ', false, kReplace)});
}

}  // namespace sluice::admin
