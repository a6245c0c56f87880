// A config's quotas as the data plane enforces them (issue 41):
// tenants[].quotas, a key's own and quota: turned into quota/'s values.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "quota/quotas.h"

namespace sluice::proxy {

std::vector<quota::LimitDef> limit_defs(const std::vector<config::QuotaLimitSpec>& specs);
// null when no tenant has a quota and auth: is off (no key can have one).
std::shared_ptr<const quota::QuotaPolicy> make_quota_policy(const config::Config& c);

}  // namespace sluice::proxy
