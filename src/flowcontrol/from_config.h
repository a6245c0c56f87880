// Builds the flow controller that a config describes.
#pragma once

#include <memory>

#include "config/config.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {

ControllerConfig controller_config(const config::Config& config);
// Without the flowControl gate: no limits, no TTL, but flows stay bounded
// (flowControl.maxFlows, flowIdleTimeout).
ControllerConfig ungated_controller_config(const config::Config& config);
// A controller for `config`'s endpoints, with a no-op sink (the shell sets its own).
std::unique_ptr<Controller> make_controller(const config::Config& config);

// Built through the extension registry (sluice/extensions.h). The detector's
// type was checked by the config loader (an unknown one throws
// config::ConfigError); a usage limit spec without a type is none (null).
std::unique_ptr<SaturationDetector> make_detector(const config::SaturationDetectorSpec& spec);
std::unique_ptr<UsageLimitPolicy> make_usage_limit_policy(const config::UsageLimitSpec& spec);
// The admitters declared under plugins:, in their order. Throws
// config::ConfigError naming the plugin, the field and the line.
std::vector<std::unique_ptr<Admitter>> make_admitters(const config::Config& config);

}  // namespace sluice::flowcontrol
