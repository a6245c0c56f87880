// Admission's check of the steering values a request's head carries (the
// fairness id, the objective): they become table keys, metric labels and
// log fields, so they are validated here, once (protocol/steering.h), and
// nothing behind sees raw bytes. A refusal is a 400; the request is never
// changed.
#pragma once

#include <cstddef>

#include "admission/request.h"

namespace sluice::admission {

// In order: a steering header sent more than once (400
// repeated-steering-header), a fairness id (400 invalid-fairness-id) or an
// objective (400 invalid-objective) that is not 1 to max_fairness_id_bytes
// token characters (server.maxFairnessIdBytes). An absent value is valid.
Verdict check_steering(const Request& r, std::size_t max_fairness_id_bytes);

}  // namespace sluice::admission
