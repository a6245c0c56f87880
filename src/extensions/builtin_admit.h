// The admission and fairness plugins of llm-d (issue 40, item 3):
// probabilistic-admitter, program-aware-fairness.
#pragma once

#include "sluice/extensions.h"

namespace sluice {

void add_admit_plugins(ExtensionRegistry& r);

}  // namespace sluice
