#include "extensions/builtin_pd.h"

#include "scheduling/plugins/always_disagg_pd_decider.h"
#include "scheduling/plugins/context_length_aware.h"
#include "scheduling/plugins/topology_affinity.h"

namespace sluice {

namespace {

using namespace sluice::scheduling;  // NOLINT: the plugin classes

// context-length-aware: label (default llm-d.ai/context-length-range, not
// empty), enableFiltering (default false).
std::unique_ptr<Plugin> make_context_length_aware(PluginParams& p, PluginContext&) {
  std::string label = p.string("label").value_or(std::string(ContextLengthAware::kDefaultLabel));
  if (label.empty()) p.fail("label", "must not be empty");
  const bool filtering = p.boolean("enableFiltering").value_or(false);
  p.finish();
  return std::make_unique<ContextLengthAware>(std::move(label), filtering);
}

// topology-extractor: the label of each level; empty or absent, the
// Kubernetes default.
std::unique_ptr<Plugin> make_topology_extractor(PluginParams& p, PluginContext&) {
  TopologyExtractor::LabelNames names = TopologyExtractor::default_labels();
  const char* keys[] = {"hostname", "rack", "zone", "region"};
  for (std::size_t i = 0; i < names.size(); ++i)
    if (auto v = p.string(keys[i]); v && !v->empty()) names[i] = *v;
  p.finish();
  return std::make_unique<TopologyExtractor>(std::move(names));
}

// The extractor a topology-affinity plugin reads: the one named by
// topologyProducerName, else the only one declared, else none.
const TopologyExtractor* find_extractor(PluginParams& p, PluginContext& ctx) {
  if (auto name = p.string("topologyProducerName"); name && !name->empty()) {
    auto* x = dynamic_cast<TopologyExtractor*>(ctx.find(*name));
    if (!x) p.fail("topologyProducerName", "'" + *name + "' is not a declared topology-extractor");
    return x;
  }
  auto all = ctx.of_type(TopologyExtractor::kType);
  if (all.size() > 1)
    p.fail("", "several topology-extractor plugins: name one with topologyProducerName");
  return all.empty() ? nullptr : static_cast<TopologyExtractor*>(all.front());
}

std::unique_ptr<Plugin> make_topology_affinity_filter(PluginParams& p, PluginContext& ctx) {
  const TopologyExtractor* x = find_extractor(p, ctx);
  std::string min = p.string("minAffinity").value_or("");
  if (min.empty()) min = "host";
  auto level = parse_level(min);
  if (!level) p.fail("minAffinity", "'" + min + "' is not one of host, rack, zone, region");
  p.finish();
  return std::make_unique<TopologyAffinityFilter>(x, *level);
}

std::unique_ptr<Plugin> make_topology_affinity_scorer(PluginParams& p, PluginContext& ctx) {
  const TopologyExtractor* x = find_extractor(p, ctx);
  p.finish();
  return std::make_unique<TopologyAffinityScorer>(x);
}

}  // namespace

void add_pd_plugins(ExtensionRegistry& r) {
  r.add<Plugin>(ExtensionKind::kPdDecider, std::string(AlwaysDisaggPdDecider::kType),
                [](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
                  p.finish();
                  return std::make_unique<AlwaysDisaggPdDecider>();
                });
  r.add<Plugin>(ExtensionKind::kScorer, std::string(ContextLengthAware::kType),
                make_context_length_aware);
  r.add<Plugin>(ExtensionKind::kDataProducer, std::string(TopologyExtractor::kType),
                make_topology_extractor);
  r.add<Plugin>(ExtensionKind::kFilter, std::string(TopologyAffinityFilter::kType),
                make_topology_affinity_filter);
  r.add<Plugin>(ExtensionKind::kScorer, std::string(TopologyAffinityScorer::kType),
                make_topology_affinity_scorer);
}

}  // namespace sluice
