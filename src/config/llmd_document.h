// The parts of llm-d's EndpointPickerConfig document that llm-d v1.0
// added or regrouped (llmd_document.cc): apiVersion llm-d.ai/v1,
// requestHandler (parsers, propagatePriority), feature gates written
// name=true|false. Internal to src/config/.
#pragma once

#include <string>

#include "config/config.h"
#include "config/reader.h"

namespace sluice::config {

// The apiVersions sluice reads: GIE's, llm-d's v1alpha1 and v1 (the same
// layout; v1 moved two dataLayer sections, kept as YAML here).
bool is_supported_api_version(const std::string& v);
// requestHandler: parsers (references to declared parser plugins, in
// order) and propagatePriority.
void read_request_handler(const detail::Reader& r, Config& c, const YAML::Node& node);
// featureGates: each "name", "name=true" or "name=false" (llm-d v1.0); the
// gates turned on, in c.feature_gates.
void read_feature_gates(const detail::Reader& r, Config& c, const YAML::Node& n);
// After the plugins and the tenants are read: a passthrough-only request
// handler (no body parsed) with a plugin or a tenant policy that reads the
// body is an error naming both.
void check_request_handler(const detail::Reader& r, const Config& c, const YAML::Node& root);

}  // namespace sluice::config
