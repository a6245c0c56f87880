// Readers of tenants[].quotas and the top-level quota: section
// (quota_config.cc; config.h QuotaLimitSpec, QuotaSpec). Internal to
// src/config/.
#pragma once

#include "config/config.h"
#include "config/reader.h"

namespace sluice::config {

// tenants[i].quotas of `t` (its models read already), each limit's own
// checks and its models within the tenant's.
void read_tenant_quotas(const detail::Reader& r, const YAML::Node& node, const std::string& path,
                        TenantSpec& t);
void read_quota(const detail::Reader& r, const YAML::Node& node, QuotaSpec& q);
// What needs the whole config: quotas need auth:, a cost limit needs a
// price for each model it counts. `tenants` is the tenants: node.
void check_quotas(const detail::Reader& r, const YAML::Node& tenants, const Config& c);

}  // namespace sluice::config
