// The data-parallel plugin of llm-d (issue 40): data-parallel-profile-handler.
#pragma once

#include "sluice/extensions.h"

namespace sluice {

void add_dp_plugins(ExtensionRegistry& r);

}  // namespace sluice
