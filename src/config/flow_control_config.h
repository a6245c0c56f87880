// Readers of flowControl:, saturationDetector: and the flow-control and
// detector plugins' parameters (flow_control_config.cc). Internal to
// src/config/.
#pragma once

#include <string>

#include "config/config.h"
#include "config/reader.h"

namespace sluice::config {

bool is_detector_type(const std::string& t);
bool is_usage_limit_type(const std::string& t);
// A usage-limit policy's parameters, checked as llm-d checks them.
UsageLimitSpec read_usage_limit(const detail::Reader& r, const PluginSpec& p);
void read_flow_control(const detail::Reader& r, Config& c, const YAML::Node& node);
void read_plugin_parameters(const detail::Reader& r, Config& c);
void read_detector_parameters(const detail::Reader& r, const PluginSpec& p,
                              SaturationDetectorSpec& d);
void read_saturation_detector(const detail::Reader& r, Config& c, const YAML::Node& node);

}  // namespace sluice::config
