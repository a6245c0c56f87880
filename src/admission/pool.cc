#include "admission/pool.h"

namespace sluice::admission {

bool sheddable(const Objectives& objectives, const Request& r) {
  if (r.head.objective.empty()) return false;
  const auto it = objectives.find(r.head.objective);
  return it != objectives.end() && it->second.priority < 0;
}

Verdict shed_when_saturated(bool sheddable, bool pool_saturated) {
  if (!sheddable || !pool_saturated) return Verdict::go_on();
  return Verdict::refuse(flowcontrol::answer_for(QueueOutcome::kRejectedCapacity,
                                                 "system saturated, sheddable request dropped"));
}

}  // namespace sluice::admission
