// llm-d's program-aware-fairness metrics (llm_d_epp_program_aware_*), from
// every band whose fairness policy is program-aware-fairness: copied on the
// dispatcher, rendered on the admin thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "observe/metrics_text.h"

namespace sluice::admin {

struct ProgramAwareCopy {
  bool present = false;  // some band uses program-aware-fairness
  struct Program {
    std::string id;
    double attained_service = 0;
    double wait_ms_sum = 0;
    double waits = 0;
  };
  // One entry per program id, its bands merged (llm-d keeps one table for
  // all bands): service summed, mean wait over all its requests.
  std::vector<Program> programs;
};

// On the dispatcher thread.
void copy_program_aware(flowcontrol::Controller& c, ProgramAwareCopy& out);
// The `max_series` programs with the most attained service get series.
void render_program_aware(observe::MetricsText& m, const ProgramAwareCopy& c,
                          std::size_t max_series);

}  // namespace sluice::admin
