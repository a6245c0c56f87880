// Admission's pool step. Today only GIE's legacy admission (flow control
// off, a saturation detector configured): a sheddable request (its
// objective's priority < 0) is refused while the pool is saturated. Whether
// the pool is saturated is the caller's to find out (it reads the endpoints'
// shared state through the detector), and only for a request this step says
// is sheddable, as before. The pools of DESIGN 5.4 (a model's pool, its
// rewrite or split) will join this step.
#pragma once

#include "admission/objectives.h"
#include "admission/request.h"

namespace sluice::admission {

// The request's objective is known and its priority is below 0.
bool sheddable(const Objectives& objectives, const Request& r);

// A sheddable request while the pool is saturated: 429 rejected-capacity
// (Retry-After), "system saturated, sheddable request dropped". Otherwise
// it goes on.
Verdict shed_when_saturated(bool sheddable, bool pool_saturated);

}  // namespace sluice::admission
