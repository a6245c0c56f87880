// Readers of the auth: and tenants: sections (auth_config.cc). Internal to
// src/config/.
#pragma once

#include "config/config.h"
#include "config/reader.h"

namespace sluice::config {

void read_auth(const detail::Reader& r, const YAML::Node& node, AuthSpec& a);
void read_tenants(const detail::Reader& r, const YAML::Node& node,
                  const std::vector<ObjectiveConfig>& objectives, std::vector<TenantSpec>& out);
void tenant_weights_to_flows(const detail::Reader& r, const YAML::Node& node, Config& c);

}  // namespace sluice::config
