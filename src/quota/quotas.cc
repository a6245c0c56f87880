#include "quota/quotas.h"

#include <algorithm>

namespace sluice::quota {

namespace {

constexpr std::string_view kTenant = "t:";
constexpr std::string_view kKey = "k:";

void owner_name(std::string& out, std::string_view kind, std::string_view id) {
  out.assign(kind);
  out.append(id);
}

}  // namespace

Price QuotaPolicy::price_of(std::string_view model) const {
  const Price* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& [pattern, price] : prices) {
    if (pattern == model) return price;
    if (pattern.empty() || pattern.back() != '*') continue;
    const std::string_view stem = std::string_view(pattern).substr(0, pattern.size() - 1);
    if (model.substr(0, stem.size()) == stem && (!best || stem.size() + 1 > best_len)) {
      best = &price;
      best_len = stem.size() + 1;
    }
  }
  return best ? *best : Price{};
}

std::size_t Quotas::configure(std::shared_ptr<const QuotaPolicy> policy) {
  {
    std::lock_guard lock(mu_);
    current_ = policy;
  }
  static const QuotaPolicy kNone;
  const QuotaPolicy& p = policy ? *policy : kNone;
  std::size_t failed = 0;
  for (const auto& [tenant, defs] : p.tenants)
    failed += !ledger_.set_owner(std::string(kTenant) + tenant, defs);
  for (const auto& name : ledger_.owner_names()) {
    if (!name.starts_with(kTenant)) continue;
    const std::string tenant = name.substr(kTenant.size());
    if (p.tenants.contains(tenant)) continue;
    if (p.has_default)
      failed += !ledger_.set_owner(name, p.default_limits, /*bounded=*/true);
    else
      ledger_.remove_owner(name);
  }
  return failed;
}

std::shared_ptr<const QuotaPolicy> Quotas::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void Quotas::set_key(std::string_view key_id, const std::vector<LimitDef>& defs) {
  const std::string name = std::string(kKey) + std::string(key_id);
  if (defs.empty())
    ledger_.remove_owner(name);
  else
    ledger_.set_owner(name, defs);
}

std::size_t Quotas::set_keys(
    const std::vector<std::pair<std::string, std::vector<LimitDef>>>& keys) {
  std::unordered_map<std::string, const std::vector<LimitDef>*> listed;
  for (const auto& [id, defs] : keys) listed.emplace(std::string(kKey) + id, &defs);  // first wins
  std::size_t failed = 0;
  for (const auto& name : ledger_.owner_names())
    if (name.starts_with(kKey) && !listed.count(name)) ledger_.remove_owner(name);
  for (const auto& [name, defs] : listed) {
    if (defs->empty())
      ledger_.remove_owner(name);
    else
      failed += !ledger_.set_owner(name, *defs);
  }
  return failed;
}

std::vector<Quotas::Row> Quotas::rows(std::string_view tenant, Millis now, std::size_t max) const {
  std::vector<std::string> names = ledger_.owner_names();
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.starts_with(kTenant) != b.starts_with(kTenant) ? a.starts_with(kTenant) : a < b;
  });
  std::vector<Row> out;
  for (const auto& name : names) {
    const bool key = name.starts_with(kKey);
    const std::string_view id = std::string_view(name).substr(2);
    if (!tenant.empty() && (key || id != tenant)) continue;
    const auto limits = ledger_.find(name);
    if (!limits) continue;  // forgotten meanwhile
    for (const auto& l : *limits) {
      if (out.size() >= max) return out;
      out.push_back(Row{key, std::string(id), l->def(), l->snapshot(now)});
    }
  }
  return out;
}

bool Quotas::reset_tenant(std::string_view tenant, bool fleet_books) {
  const auto limits = ledger_.find(std::string(kTenant) + std::string(tenant));
  if (!limits) return false;
  for (const auto& l : *limits) ledger_.reset(l, fleet_books);
  return true;
}

Quotas::Admit Quotas::reserve(const QuotaPolicy& policy, std::string_view tenant,
                              std::string_view key_id, std::string_view model, const Usage& worst,
                              Millis now, std::string& scratch) {
  Admit out;
  owner_name(scratch, kTenant, tenant);
  auto t = ledger_.find(scratch);
  if (!t && !policy.tenants.contains(tenant) && policy.has_default) {
    // The "*" limits of the policy configured last (a reload may have
    // changed them since this thread's policy).
    const auto now_policy = current();
    if (now_policy && now_policy->has_default && !now_policy->tenants.contains(tenant)) {
      if (!ledger_.set_owner(scratch, now_policy->default_limits, /*bounded=*/true)) {
        out.owners_full = true;
        return out;
      }
      t = ledger_.find(scratch);
    }
  }
  std::shared_ptr<const Limits> k;
  if (!key_id.empty()) {
    owner_name(scratch, kKey, key_id);
    k = ledger_.find(scratch);
  }
  if (!t && !k) return out;
  out.limited = true;
  out.admit = ledger_.reserve({t.get(), k.get()}, model, worst, policy.price_of(model), now);
  return out;
}

}  // namespace sluice::quota
