#include "proxy/quota_policy.h"

#include <chrono>

namespace sluice::proxy {

// Every limit the config lets an owner have, the ledger holds.
static_assert(config::kMaxQuotaLimits <= quota::Ledger::kMaxLimitsPerOwner);

namespace {

quota::Measure measure_of(config::QuotaMeasure m) {
  switch (m) {
    case config::QuotaMeasure::kRequests:
      return quota::Measure::kRequests;
    case config::QuotaMeasure::kInputTokens:
      return quota::Measure::kInputTokens;
    case config::QuotaMeasure::kOutputTokens:
      return quota::Measure::kOutputTokens;
    case config::QuotaMeasure::kTokens:
      return quota::Measure::kTokens;
    case config::QuotaMeasure::kCost:
      return quota::Measure::kCost;
  }
  return quota::Measure::kTokens;
}

quota::Calendar calendar_of(config::QuotaCalendar c) {
  switch (c) {
    case config::QuotaCalendar::kDay:
      return quota::Calendar::kDay;
    case config::QuotaCalendar::kMonth:
      return quota::Calendar::kMonth;
    case config::QuotaCalendar::kNone:
      break;
  }
  return quota::Calendar::kNone;
}

}  // namespace

std::vector<quota::LimitDef> limit_defs(const std::vector<config::QuotaLimitSpec>& specs) {
  std::vector<quota::LimitDef> out;
  out.reserve(specs.size());
  for (const auto& s : specs) {
    quota::LimitDef d;
    d.name = s.name;
    d.measure = measure_of(s.measure);
    d.amount = s.amount;
    d.period.calendar = calendar_of(s.calendar);
    if (d.period.calendar == quota::Calendar::kNone)
      d.period.window = std::chrono::duration_cast<std::chrono::milliseconds>(s.window).count();
    d.shadow = s.shadow;
    d.queue = s.queue;
    d.models = s.models;
    out.push_back(std::move(d));
  }
  return out;
}

std::shared_ptr<const quota::QuotaPolicy> make_quota_policy(const config::Config& c) {
  auto p = std::make_shared<quota::QuotaPolicy>();
  for (const auto& t : c.tenants) {
    if (t.quotas.empty()) continue;
    if (t.id == "*") {
      p->has_default = true;
      p->default_limits = limit_defs(t.quotas);
    } else {
      p->tenants.emplace(t.id, limit_defs(t.quotas));
    }
  }
  // With auth: on, a key may carry its own limits (the key file, the admin
  // API) whether or not a tenant has one.
  if (p->empty() && !c.auth.enabled) return nullptr;
  for (const auto& price : c.quota.prices)
    p->prices.emplace_back(price.model,
                           quota::Price{price.input_per_million, price.output_per_million});
  p->default_output_tokens = c.quota.default_output_tokens;
  switch (c.quota.headers) {
    case config::QuotaHeaders::kAlways:
      p->headers = quota::HeadersMode::kAlways;
      break;
    case config::QuotaHeaders::kRefused:
      p->headers = quota::HeadersMode::kRefused;
      break;
    case config::QuotaHeaders::kNever:
      p->headers = quota::HeadersMode::kNever;
      break;
  }
  return p;
}

}  // namespace sluice::proxy
