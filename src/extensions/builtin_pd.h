// The prefill/decode and topology plugins of llm-d (issue 40):
// always-disagg-pd-decider, context-length-aware, topology-extractor,
// topology-affinity-filter and topology-affinity-scorer.
#pragma once

#include "sluice/extensions.h"

namespace sluice {

void add_pd_plugins(ExtensionRegistry& r);

}  // namespace sluice
