// The admin token check: `Authorization: Bearer <token>`.
#pragma once

#include <string>

namespace sluice::admin {

// True when `authorization` is "Bearer " (the scheme in any case, as on the
// data plane) followed by exactly `token`; the comparison takes the same
// time however much of the token matched.
bool bearer_matches(const std::string& authorization, const std::string& token);

}  // namespace sluice::admin
