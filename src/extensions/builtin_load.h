// The load and prefix plugins of llm-d (issue 40): inflight-load-producer,
// token-load-scorer, active-request-scorer, load-aware-scorer,
// no-hit-lru-scorer and prefix-cache-affinity-filter. Config time only.
#pragma once

#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "sluice/extensions.h"

namespace sluice {

void add_load_plugins(ExtensionRegistry& r);

// The approx-prefix-cache-producer a prefix-aware plugin reads: the one
// named by `prefixMatchInfoProducerName` (llm-d) or `producer` (sluice's
// earlier name; both may be given if they agree), else the only one
// declared, else null. Fails naming the field if the name is not such a
// producer, or if several are declared and none is named.
scheduling::ApproxPrefixCacheProducer* find_prefix_producer(PluginParams& p, PluginContext& ctx);

}  // namespace sluice
