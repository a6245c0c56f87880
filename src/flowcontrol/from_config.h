// Builds the flow controller that a config describes.
#pragma once

#include <memory>

#include "config/config.h"
#include "flowcontrol/controller.h"

namespace sluice::flowcontrol {

ControllerConfig controller_config(const config::Config& config);
std::unique_ptr<SaturationDetector> make_detector(const config::SaturationDetectorSpec& spec);
// A controller for `config`'s endpoints, with a no-op sink (the shell sets its own).
std::unique_ptr<Controller> make_controller(const config::Config& config);

}  // namespace sluice::flowcontrol
