// The in-tree extensions: every factory sluice builds by name, in one
// registry (include/sluice/extensions.h), checked against the declared list
// of types on first use.
#include <random>
#include <set>

#include "config/config.h"
#include "extensions/builtin_admit.h"
#include "extensions/builtin_dp.h"
#include "extensions/builtin_load.h"
#include "extensions/builtin_pd.h"
#include "flowcontrol/displacement_policies.h"
#include "flowcontrol/fairness_policies.h"
#include "flowcontrol/ordering_policies.h"
#include "flowcontrol/saturation_detectors.h"
#include "flowcontrol/usage_limit_policies.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/by_label_filter.h"
#include "scheduling/plugins/by_label_selector_filter.h"
#include "scheduling/plugins/disagg_profile_handler.h"
#include "scheduling/plugins/in_flight_requests_scorer.h"
#include "scheduling/plugins/kv_cache_utilization_scorer.h"
#include "scheduling/plugins/lora_affinity_scorer.h"
#include "scheduling/plugins/max_score_picker.h"
#include "scheduling/plugins/prefix_based_pd_decider.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/plugins/queue_scorer.h"
#include "scheduling/plugins/random_picker.h"
#include "scheduling/plugins/running_requests_size_scorer.h"
#include "scheduling/plugins/session_affinity_scorer.h"
#include "scheduling/plugins/single_profile_handler.h"
#include "scheduling/plugins/weighted_random_picker.h"
#include "sluice/extensions.h"

namespace sluice {

namespace {

using namespace sluice::scheduling;  // NOLINT: the plugin classes
using flowcontrol::DisplacementPolicy;
using flowcontrol::FairnessParams;
using flowcontrol::FairnessPolicy;
using flowcontrol::OrderingPolicy;
using flowcontrol::SaturationDetector;
using flowcontrol::UsageLimitPolicy;

std::uint64_t seed() { return std::random_device{}(); }

template <class T>
PluginFactory simple() {
  return [](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
    p.finish();
    return std::make_unique<T>();
  };
}

template <class T>
PluginFactory picker() {
  return [](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
    // GIE: values <= 0 fall back to 1.
    auto n = p.integer("maxNumOfEndpoints", INT32_MIN, 1 << 16).value_or(1);
    p.finish();
    return std::make_unique<T>(static_cast<std::uint32_t>(n <= 0 ? 1 : n), seed());
  };
}

// The producer a prefix-aware plugin uses (builtin_load.h).
ApproxPrefixCacheProducer* find_producer(PluginParams& p, PluginContext& ctx) {
  return find_prefix_producer(p, ctx);
}

void add_flow_control(ExtensionRegistry& r) {
  using K = ExtensionKind;
  r.add<OrderingPolicy>(K::kOrderingPolicy, "fcfs-ordering-policy",
                        [] { return std::make_unique<flowcontrol::FcfsOrdering>(); });
  r.add<OrderingPolicy>(K::kOrderingPolicy, "edf-ordering-policy",
                        [] { return std::make_unique<flowcontrol::EdfOrdering>(); });
  r.add<OrderingPolicy>(K::kOrderingPolicy, "slo-deadline-ordering-policy",
                        [] { return std::make_unique<flowcontrol::SloDeadlineOrdering>(); });
  r.add<FairnessPolicy>(
      K::kFairnessPolicy, "global-strict-fairness-policy",
      [](const FairnessParams&) { return std::make_unique<flowcontrol::GlobalStrictFairness>(); });
  r.add<FairnessPolicy>(
      K::kFairnessPolicy, "round-robin-fairness-policy",
      [](const FairnessParams&) { return std::make_unique<flowcontrol::RoundRobinFairness>(); });
  r.add<FairnessPolicy>(K::kFairnessPolicy, "vtc-fairness-policy", [](const FairnessParams& p) {
    return std::make_unique<flowcontrol::VtcFairness>(p.input_price, p.output_price);
  });
  r.add<DisplacementPolicy>(K::kDisplacementPolicy, "lowest-band-newest-first",
                            [] { return std::make_unique<flowcontrol::LowestBandNewestFirst>(); });
  r.add<SaturationDetector>(
      K::kSaturationDetector, "utilization-detector", [](const config::SaturationDetectorSpec& s) {
        return std::make_unique<flowcontrol::UtilizationDetector>(
            flowcontrol::UtilizationParams{s.queue_depth_threshold, s.kv_cache_util_threshold,
                                           s.metrics_staleness_threshold, s.headroom});
      });
  r.add<SaturationDetector>(
      K::kSaturationDetector, "concurrency-detector", [](const config::SaturationDetectorSpec& s) {
        return std::make_unique<flowcontrol::ConcurrencyDetector>(flowcontrol::ConcurrencyParams{
            s.tokens_mode, s.max_concurrency, s.max_token_concurrency, s.headroom});
      });
  r.add<UsageLimitPolicy>(
      K::kUsageLimitPolicy, "static-usage-limit-policy", [](const config::UsageLimitSpec& s) {
        return std::make_unique<flowcontrol::StaticUsageLimitPolicy>(s.threshold);
      });
  r.add<UsageLimitPolicy>(
      K::kUsageLimitPolicy, "priority-holdback-policy", [](const config::UsageLimitSpec& s) {
        using D = flowcontrol::PriorityHoldbackPolicy::Domain;
        return std::make_unique<flowcontrol::PriorityHoldbackPolicy>(s.min_ceiling, s.max_ceiling,
                                                                     s.explicit_domain
                                                                         ? D::kExplicit
                                                                     : s.value_domain ? D::kValue
                                                                                      : D::kRank,
                                                                     s.ceilings);
      });
  r.add<UsageLimitPolicy>(K::kUsageLimitPolicy, "soft-reflective-ceiling-policy",
                          [](const config::UsageLimitSpec&) {
                            return std::make_unique<flowcontrol::SoftReflectiveCeilingPolicy>();
                          });
}

// approx-prefix-cache-producer: the prefix hashing parameters.
std::unique_ptr<Plugin> make_prefix_cache_producer(PluginParams& p, PluginContext&) {
  auto params = read_prefix_params(p);
  p.finish();
  return std::make_unique<ApproxPrefixCacheProducer>(params);
}

// prefix-cache-scorer: scores by its producer's prefix matches. The
// scorer's own parameters are its producer's when it has to make one; the
// builder does that (it needs to own the producer), see build_scheduler.
std::unique_ptr<Plugin> make_prefix_cache_scorer(PluginParams& p, PluginContext& ctx) {
  auto* prod = find_producer(p, ctx);
  if (!prod) p.fail("", "internal: no approx-prefix-cache-producer was made for this scorer");
  read_prefix_params(p);  // accepted (and checked); the producer holds them
  // llm-d: the weight of the match's length against its ratio, in [0, 1].
  const double weight = p.number("matchLengthWeight").value_or(0.0);
  if (weight < 0 || weight > 1) p.fail("matchLengthWeight", "must be between 0 and 1");
  auto scale = p.integer("matchLengthScaleTokens", INT64_MIN, INT64_MAX).value_or(8192);
  if (weight > 0 && scale <= 0)
    p.fail("matchLengthScaleTokens", "must be greater than 0 when matchLengthWeight is");
  if (scale > UINT32_MAX) p.fail("matchLengthScaleTokens", "must be at most 4294967295");
  p.finish();
  return std::make_unique<PrefixCacheScorer>(prod, weight,
                                             static_cast<std::uint32_t>(scale > 0 ? scale : 8192));
}

// prefix-based-pd-decider: prefill when more than nonCachedTokens are not
// cached.
std::unique_ptr<Plugin> make_prefix_based_pd_decider(PluginParams& p, PluginContext& ctx) {
  auto n = p.integer("nonCachedTokens", 0, INT64_MAX).value_or(0);
  auto* prod = find_producer(p, ctx);
  p.finish();
  return std::make_unique<PrefixBasedPdDecider>(static_cast<std::uint64_t>(n), prod);
}

// disagg-profile-handler: its profiles and decider, given nested
// (profiles/deciders) or flat, and its topology.
std::unique_ptr<Plugin> make_disagg_profile_handler(PluginParams& p, PluginContext& ctx) {
  std::string decode = "decode", prefill = "prefill", decider_name;
  bool nested = false, flat = false;
  if (auto m = p.mapping("profiles")) {
    nested = true;
    decode = m->string("decode").value_or(decode);
    prefill = m->string("prefill").value_or(prefill);
    m->string("encode");  // encode stage: accepted, not supported (no encoder endpoints)
    m->finish();
  }
  if (auto m = p.mapping("deciders")) {
    nested = true;
    decider_name = m->string("prefill").value_or("");
    m->string("encode");
    m->finish();
  }
  if (auto v = p.string("decodeProfile")) flat = true, decode = *v;
  if (auto v = p.string("prefillProfile")) flat = true, prefill = *v;
  if (auto v = p.string("deciderPluginName")) flat = true, decider_name = *v;
  if (auto v = p.string("prefillDeciderPluginName")) flat = true, decider_name = *v;
  if (nested && flat)
    p.fail("",
           "use either profiles/deciders or the flat "
           "decodeProfile/prefillProfile/deciderPluginName, not both");
  PdDecider* decider = nullptr;
  if (!decider_name.empty()) {
    decider = dynamic_cast<PdDecider*>(ctx.find(decider_name));
    if (!decider) p.fail("deciders", "'" + decider_name + "' is not a declared P/D decider plugin");
  }
  TopologyParams topo;
  if (auto t = p.mapping("topology")) {
    if (auto v = t->string_list("labels")) topo.labels = *v;
    if (auto v = t->number("margin")) {
      if (*v < 0 || *v > 1) t->fail("margin", "must be between 0 and 1");
      topo.margin = *v;
    }
    if (auto v = t->boolean("enabled")) topo.enabled = *v;
    t->finish();
  }
  p.finish();
  return std::make_unique<DisaggProfileHandler>(decode, prefill, decider, topo);
}

// by-label: keeps endpoints whose label has one of validValues (or none,
// if allowsNoLabel).
std::unique_ptr<Plugin> make_by_label_filter(PluginParams& p, PluginContext&) {
  auto label = p.string("label");
  if (!label || label->empty()) p.fail("label", "is required");
  auto values = p.string_list("validValues").value_or(std::vector<std::string>{});
  bool allows = p.boolean("allowsNoLabel").value_or(false);
  if (values.empty() && !allows)
    p.fail("validValues", "must not be empty unless allowsNoLabel is true");
  p.finish();
  return std::make_unique<ByLabelFilter>(
      "by-label", *label, std::set<std::string, std::less<>>(values.begin(), values.end()), allows);
}

// The scorers, the single profile handler and the pickers that take no
// parameters but maxNumOfEndpoints.
void add_simple_scheduling(ExtensionRegistry& r) {
  r.add<Plugin>(ExtensionKind::kScorer, std::string(QueueScorer::kType), simple<QueueScorer>());
  r.add<Plugin>(ExtensionKind::kScorer, std::string(InFlightRequestsScorer::kType),
                simple<InFlightRequestsScorer>());
  r.add<Plugin>(ExtensionKind::kScorer, std::string(RunningRequestsSizeScorer::kType),
                simple<RunningRequestsSizeScorer>());
  r.add<Plugin>(ExtensionKind::kScorer, std::string(KvCacheUtilizationScorer::kType),
                simple<KvCacheUtilizationScorer>());
  r.add<Plugin>(ExtensionKind::kScorer, std::string(LoraAffinityScorer::kType),
                simple<LoraAffinityScorer>());
  r.add<Plugin>(ExtensionKind::kScorer, std::string(SessionAffinityScorer::kType),
                simple<SessionAffinityScorer>());
  r.add<Plugin>(ExtensionKind::kProfileHandler, std::string(SingleProfileHandler::kType),
                simple<SingleProfileHandler>());
  r.add<Plugin>(ExtensionKind::kPicker, std::string(MaxScorePicker::kType),
                picker<MaxScorePicker>());
  r.add<Plugin>(ExtensionKind::kPicker, std::string(RandomPicker::kType), picker<RandomPicker>());
  r.add<Plugin>(ExtensionKind::kPicker, std::string(WeightedRandomPicker::kType),
                picker<WeightedRandomPicker>());
}

// The label filters (by-label, the label selectors, prefill and decode).
void add_label_filters(ExtensionRegistry& r) {
  r.add<Plugin>(ExtensionKind::kFilter, "by-label", make_by_label_filter);
  for (std::string_view type : {"by-label-selector", "label-selector-filter"}) {
    r.add<Plugin>(ExtensionKind::kFilter, std::string(type),
                  [type](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
                    auto reqs = read_label_selector(p);
                    p.finish();
                    return std::make_unique<ByLabelSelectorFilter>(type, std::move(reqs));
                  });
  }
  r.add<Plugin>(ExtensionKind::kFilter, "prefill-filter",
                [](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
                  p.finish();
                  return ByLabelFilter::prefill();
                });
  r.add<Plugin>(ExtensionKind::kFilter, "decode-filter",
                [](PluginParams& p, PluginContext&) -> std::unique_ptr<Plugin> {
                  p.finish();
                  return ByLabelFilter::decode();
                });
}

void add_scheduling(ExtensionRegistry& r) {
  add_simple_scheduling(r);
  r.add<Plugin>(ExtensionKind::kDataProducer, std::string(ApproxPrefixCacheProducer::kType),
                make_prefix_cache_producer);
  r.add<Plugin>(ExtensionKind::kScorer, std::string(PrefixCacheScorer::kType),
                make_prefix_cache_scorer);
  r.add<Plugin>(ExtensionKind::kPdDecider, std::string(PrefixBasedPdDecider::kType),
                make_prefix_based_pd_decider);
  r.add<Plugin>(ExtensionKind::kProfileHandler, std::string(DisaggProfileHandler::kType),
                make_disagg_profile_handler);
  add_label_filters(r);
}

ExtensionRegistry make_builtin() {
  ExtensionRegistry r;
  add_flow_control(r);
  add_scheduling(r);
  add_admit_plugins(r);
  add_load_plugins(r);
  add_pd_plugins(r);
  add_dp_plugins(r);
  for (const auto& e : kBuiltinExtensionTypes) {
    auto kind = r.kind_of(e.type);
    if (e.kind == ExtensionKind::kBuiltIn) {
      if (kind)
        throw std::logic_error("built-in plugin '" + std::string(e.type) + "' has a factory");
      continue;
    }
    if (!kind)
      throw std::logic_error("extension '" + std::string(e.type) + "' is declared but not built");
  }
  for (auto kind :
       {ExtensionKind::kOrderingPolicy, ExtensionKind::kFairnessPolicy,
        ExtensionKind::kDisplacementPolicy, ExtensionKind::kSaturationDetector,
        ExtensionKind::kUsageLimitPolicy, ExtensionKind::kDataProducer, ExtensionKind::kFilter,
        ExtensionKind::kScorer, ExtensionKind::kPicker, ExtensionKind::kPdDecider,
        ExtensionKind::kProfileHandler, ExtensionKind::kAdmitter})
    for (const auto& t : r.types(kind))
      if (!is_builtin(t, kind))
        throw std::logic_error("extension '" + t + "' is built but not declared as a " +
                               std::string(kind_name(kind)) + " in kBuiltinExtensionTypes");
  return r;
}

}  // namespace

const ExtensionRegistry& builtin_extensions() {
  static const ExtensionRegistry registry = make_builtin();
  return registry;
}

}  // namespace sluice
