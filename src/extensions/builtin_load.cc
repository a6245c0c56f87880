// Factories of llm-d's load and prefix plugins (builtin_load.h).
#include "extensions/builtin_load.h"

namespace sluice {

using namespace sluice::scheduling;  // NOLINT: the plugin classes

ApproxPrefixCacheProducer* find_prefix_producer(PluginParams& p, PluginContext& ctx) {
  auto llmd = p.string("prefixMatchInfoProducerName");
  auto own = p.string("producer");
  if (llmd && own && *llmd != *own)
    p.fail("prefixMatchInfoProducerName",
           "names '" + *llmd + "' but producer names '" + *own + "': give one of them");
  if (llmd || own) {
    const std::string key = llmd ? "prefixMatchInfoProducerName" : "producer";
    const std::string& name = llmd ? *llmd : *own;
    auto* prod = dynamic_cast<ApproxPrefixCacheProducer*>(ctx.find(name));
    if (!prod) p.fail(key, "'" + name + "' is not an approx-prefix-cache-producer");
    return prod;
  }
  auto all = ctx.of_type(ApproxPrefixCacheProducer::kType);
  if (all.size() > 1)
    p.fail("",
           "several approx-prefix-cache-producer plugins: name one with "
           "`prefixMatchInfoProducerName`");
  return all.empty() ? nullptr : static_cast<ApproxPrefixCacheProducer*>(all.front());
}

void add_load_plugins(ExtensionRegistry&) {}

}  // namespace sluice
