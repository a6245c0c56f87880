// Interim endpoint choice until the profile-based scheduler lands: the usable
// endpoint with the fewest in-flight requests, ties broken by rotating the
// starting point so equal endpoints share load evenly.
#pragma once

#include <cstdint>
#include <vector>

#include "datalayer/endpoint_set.h"

namespace sluice::scheduling {

// Returns the index of the chosen endpoint, or -1 when none is usable.
// `excluded[i]` true skips endpoint i (already tried for this request).
// `rotation` is the caller's (per-thread) tie-break counter.
int pick_least_in_flight(const datalayer::EndpointSet& endpoints, const std::vector<bool>& excluded,
                         datalayer::Clock::time_point now, std::uint32_t& rotation);

}  // namespace sluice::scheduling
