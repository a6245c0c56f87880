// Admission's quota step: the seam of issue 41, item 2, between the
// tenant's checks and flow control. There a request will reserve its worst
// case (its input estimate plus the largest output limit its body names,
// else its tenant's maxTokens, else quota.defaultOutputTokens) against its
// tenant's and key's limits, the caller holding the reservation until the
// request ends and settling it with the tokens used (the tenant step's
// shape: decide, take from shared state, settle). No quota exists yet:
// nothing is reserved, and every request goes on.
#pragma once

#include "admission/request.h"

namespace sluice::admission {

// The seam: no quota is configured anywhere yet, so nothing to reserve.
inline Verdict quota_reserve_seam(const Request&) { return Verdict::go_on(); }

}  // namespace sluice::admission
