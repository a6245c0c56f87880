// tenants[].quotas and quota: (issue 41, item 1). Read and checked here;
// nothing enforces them yet.
#include "config/quota_config.h"

#include <set>

#include "config/quota_limit.h"
#include "config/units.h"

namespace sluice::config {
namespace {

using namespace detail;

QuotaLimitSpec read_limit(const Reader& r, const YAML::Node& item, const std::string& path,
                          const TenantSpec& t) {
  if (!item.IsMap()) fail(r.source, item, path, "expected a mapping");
  QuotaLimitDraft draft;
  for (const auto& kv : item) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = path + "." + key;
    if (key == "models") {
      r.sequence(kv.second, field);
      for (std::size_t i = 0; i < kv.second.size(); ++i) {
        const std::string at = field + "[" + std::to_string(i) + "]";
        const std::string model = r.string(kv.second[i], at);
        if (auto bad = draft.add_model(model); !bad.empty()) fail(r.source, kv.second[i], at, bad);
        if (!model_pattern_inside(model, t.models))
          fail(r.source, kv.second[i], at,
               "'" + model + "' is outside tenant '" + t.id +
                   "''s models: a limit counts only models its tenant may use");
      }
      continue;
    }
    const std::string bad = draft.set(key, r.scalar(kv.second, field));
    if (bad == QuotaLimitDraft::kUnknownField) fail(r.source, kv.first, field, "unknown field");
    if (!bad.empty()) fail(r.source, kv.second, field, bad);
  }
  QuotaLimitSpec out;
  if (auto bad = draft.finish(out))
    fail(r.source, item, bad.field.empty() ? path : path + "." + bad.field, bad.what);
  out.line = item.Mark().line + 1;
  return out;
}

ModelPrice read_price(const Reader& r, Fields& f, const YAML::Node& item) {
  ModelPrice p;
  p.line = item.Mark().line + 1;
  auto model = f.take("model");
  if (!model) fail(r.source, item, f.child("model"), "is required");
  p.model = r.string(model, f.child("model"));
  if (p.model.find('*') != std::string::npos && p.model.find('*') != p.model.size() - 1)
    fail(r.source, model, f.child("model"), "a model is a name, a prefix ending in '*', or *");
  auto amount = [&](const char* key, std::uint64_t& out) {
    auto n = f.take(key);
    if (!n) fail(r.source, item, f.child(key), "is required (per million tokens; 0 is free)");
    const std::string s = r.scalar(n, f.child(key));
    auto v = parse_micro_units(s);
    if (!v)
      fail(r.source, n, f.child(key),
           "expected a price like 0.15 or 2.5 (at most 6 decimals), got '" + s + "'");
    out = *v;
  };
  amount("input", p.input_per_million);
  amount("output", p.output_per_million);
  return p;
}

template <class E>
E one_of(const Reader& r, const YAML::Node& n, const std::string& path,
         std::initializer_list<std::pair<const char*, E>> choices, const char* expected) {
  const std::string s = r.scalar(n, path);
  for (const auto& [name, value] : choices)
    if (s == name) return value;
  fail(r.source, n, path, std::string("expected ") + expected + ", got '" + s + "'");
}

}  // namespace

void read_tenant_quotas(const Reader& r, const YAML::Node& node, const std::string& path,
                        TenantSpec& t) {
  r.sequence(node, path);
  if (node.size() > kMaxQuotaLimits) fail(r.source, node, path, "at most 16 limits");
  for (std::size_t i = 0; i < node.size(); ++i)
    t.quotas.push_back(read_limit(r, node[i], path + "[" + std::to_string(i) + "]", t));
  if (auto bad = check_quota_list(t.quotas)) {
    const auto at = std::stoul(bad.field.substr(1));
    fail(r.source, node[at]["name"], path + bad.field, bad.what);
  }
}

void read_quota(const Reader& r, const YAML::Node& node, QuotaSpec& q) {
  Fields f(r.source, node, "quota");
  if (auto n = f.take("prices")) {
    std::set<std::string> seen;
    read_list(r, n, "quota.prices", q.prices, [&](Fields& pf, const YAML::Node& item, auto& p) {
      p = read_price(r, pf, item);
      if (!seen.insert(p.model).second)
        fail(r.source, item["model"], pf.child("model"), "duplicate price for '" + p.model + "'");
    });
  }
  if (auto n = f.take("failMode"))
    q.fail_mode = one_of<QuotaFailMode>(r, n, "quota.failMode",
                                        {{"open", QuotaFailMode::kOpen},
                                         {"closed", QuotaFailMode::kClosed},
                                         {"local", QuotaFailMode::kLocal}},
                                        "open, closed or local");
  if (auto n = f.take("headers"))
    q.headers = one_of<QuotaHeaders>(r, n, "quota.headers",
                                     {{"always", QuotaHeaders::kAlways},
                                      {"refused", QuotaHeaders::kRefused},
                                      {"never", QuotaHeaders::kNever}},
                                     "always, refused or never");
  if (auto n = f.take("defaultOutputTokens")) {
    q.default_output_tokens = r.quantity(n, "quota.defaultOutputTokens");
    if (q.default_output_tokens < 1 || q.default_output_tokens > 1000000000)
      fail(r.source, n, "quota.defaultOutputTokens", "must be between 1 and 1000000000");
  }
  if (auto n = f.take("maxCountedTenants")) {
    q.max_counted_tenants = r.quantity(n, "quota.maxCountedTenants");
    if (q.max_counted_tenants < 1 || q.max_counted_tenants > 10000000)
      fail(r.source, n, "quota.maxCountedTenants", "must be between 1 and 10000000");
  }
  f.finish();
}

void check_quotas(const Reader& r, const YAML::Node& tenants, const Config& c) {
  const bool identified = c.auth.enabled || !c.auth.trusted_proxies.empty();
  for (std::size_t i = 0; i < c.tenants.size(); ++i) {
    const TenantSpec& t = c.tenants[i];
    const std::string path = "tenants[" + std::to_string(i) + "].quotas";
    if (!t.quotas.empty() && !identified)
      fail(r.source, tenants[i]["quotas"], path,
           "quotas need auth: (apiKeys, jwt, clientCertificateTenants or trustedProxies): a "
           "limit on a header anyone types is none");
    for (std::size_t j = 0; j < t.quotas.size(); ++j) {
      const QuotaLimitSpec& l = t.quotas[j];
      if (l.measure != QuotaMeasure::kCost) continue;
      // What the limit counts: its models, else its tenant's, else every model.
      const std::vector<std::string> every{"*"};
      const auto& patterns = !l.models.empty() ? l.models : !t.models.empty() ? t.models : every;
      for (const auto& m : patterns)
        if (!price_covers(c.quota.prices, m))
          fail(r.source, tenants[i]["quotas"][j]["cost"], path + "[" + std::to_string(j) + "].cost",
               (m == "*" ? std::string("no price for every model")
                         : "no price for model '" + m + "'") +
                   " under quota.prices: a cost limit needs the price of each model it counts");
    }
  }
}

}  // namespace sluice::config
