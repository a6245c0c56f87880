// Builds the scheduler from a GIE EndpointPickerConfig: plugins by type
// through the extension registry (sluice/extensions.h), profiles from schedulingProfiles, with
// GIE's defaulting:
//   - no schedulingProfiles and no scheduling plugins: the default profile
//     (queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3,
//     max-score-picker);
//   - no schedulingProfiles but scheduling plugins declared: one profile
//     "default" with every declared filter, scorer and picker, in order;
//   - a scorer without a weight weighs 1;
//   - a profile without a picker gets the first declared picker, else a
//     max-score-picker;
//   - no profile handler: single-profile-handler if there is one profile,
//     else an error;
//   - prefix-cache-scorer without a declared approx-prefix-cache-producer
//     gets one built from the scorer's own parameters (GIE v1.5 forwarded
//     them; later GIE ignores them silently — sluice honours them).
// Errors throw config::ConfigError naming the file, line and field.
#pragma once

#include <memory>

#include "config/config.h"
#include "scheduling/scheduler.h"
#include "sluice/plugin.h"

namespace sluice::scheduling {

std::unique_ptr<Scheduler> build_scheduler(const config::Config& config,
                                           Scheduler::Options options = {});

}  // namespace sluice::scheduling
