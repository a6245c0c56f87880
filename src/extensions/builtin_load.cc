// Factories of llm-d's load and prefix plugins (builtin_load.h).
#include "extensions/builtin_load.h"

#include <random>

#include "scheduling/plugins/active_request_scorer.h"
#include "scheduling/plugins/inflight_load_producer.h"
#include "scheduling/plugins/load_aware_scorer.h"
#include "scheduling/plugins/no_hit_lru_scorer.h"
#include "scheduling/plugins/prefix_cache_affinity_filter.h"
#include "scheduling/plugins/token_load_scorer.h"

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

namespace {

// The prefix producer a plugin cannot do without.
ApproxPrefixCacheProducer* require_prefix_producer(PluginParams& p, PluginContext& ctx,
                                                   std::string_view type) {
  auto* prod = find_prefix_producer(p, ctx);
  if (!prod)
    p.fail("", std::string(type) +
                   " needs an approx-prefix-cache-producer: declare one in plugins (llm-d "
                   "requires it listed too)");
  return prod;
}

// The inflight-load-producer named by inFlightLoadProducerName, or the only
// one declared, or null.
InFlightLoadProducer* find_load_producer(PluginParams& p, PluginContext& ctx) {
  if (auto name = p.string("inFlightLoadProducerName")) {
    auto* prod = dynamic_cast<InFlightLoadProducer*>(ctx.find(*name));
    if (!prod)
      p.fail("inFlightLoadProducerName", "'" + *name + "' is not an inflight-load-producer");
    return prod;
  }
  auto all = ctx.of_type(InFlightLoadProducer::kType);
  if (all.size() > 1)
    p.fail("", "several inflight-load-producer plugins: name one with `inFlightLoadProducerName`");
  return all.empty() ? nullptr : static_cast<InFlightLoadProducer*>(all.front());
}

InFlightLoadProducer* require_load_producer(PluginParams& p, PluginContext& ctx,
                                            std::string_view type) {
  auto* prod = find_load_producer(p, ctx);
  if (!prod)
    p.fail("", std::string(type) +
                   " needs an inflight-load-producer: declare one in plugins (llm-d requires "
                   "it listed too)");
  return prod;
}

// A number that must be at least 0 (absent: `def`).
double non_negative(PluginParams& p, const std::string& key, double def) {
  const double v = p.number(key).value_or(def);
  if (v < 0) p.fail(key, "must not be negative");
  return v;
}

// A number in [0, 1] (absent: `def`).
double unit(PluginParams& p, const std::string& key, double def) {
  const double v = p.number(key).value_or(def);
  if (v < 0 || v > 1) p.fail(key, "must be between 0 and 1");
  return v;
}

std::unique_ptr<Plugin> make_inflight_load_producer(PluginParams& p, PluginContext& ctx) {
  InFlightLoadParams params;
  params.add_estimated_output_tokens = p.boolean("addEstimatedOutputTokens").value_or(false);
  params.output_ratio = non_negative(p, "outputRatio", params.output_ratio);
  if (auto v = p.integer("maxEstimatedOutputTokens", INT64_MIN, INT64_MAX)) {
    if (*v < 0) p.fail("maxEstimatedOutputTokens", "must not be negative");
    params.max_estimated_output_tokens = static_cast<std::uint64_t>(*v);
  }
  // llm-d shares the counts across EPP replicas; sluice's fleet sync does
  // that for its own load (accepted, no effect here).
  p.boolean("syncCrossReplicaState");
  // sluice's: when the prompt tokens leave (llm-d: at the first response bytes).
  if (auto at = p.string("releasePromptTokensAt")) {
    if (*at != "firstChunk" && *at != "completion")
      p.fail("releasePromptTokensAt", "'" + *at + "' is not firstChunk or completion");
    params.release_at_first_chunk = *at == "firstChunk";
  }
  auto* prefix = find_prefix_producer(p, ctx);
  p.finish();
  return std::make_unique<InFlightLoadProducer>(params, prefix);
}

std::unique_ptr<Plugin> make_token_load_scorer(PluginParams& p, PluginContext& ctx) {
  auto t = p.integer("queueThresholdTokens", INT64_MIN, INT64_MAX)
               .value_or(TokenLoadScorer::kDefaultThreshold);
  if (t < 0) p.fail("queueThresholdTokens", "must not be negative (0: the default, 4194304)");
  if (t == 0) t = TokenLoadScorer::kDefaultThreshold;  // llm-d: <= 0 is the default
  auto* load = require_load_producer(p, ctx, TokenLoadScorer::kType);
  p.finish();
  return std::make_unique<TokenLoadScorer>(load, static_cast<double>(t));
}

std::unique_ptr<Plugin> make_active_request_scorer(PluginParams& p, PluginContext& ctx) {
  auto idle = p.integer("idleThreshold", INT64_MIN, UINT32_MAX).value_or(0);
  if (idle < 0) p.fail("idleThreshold", "must not be negative");
  const double busy = unit(p, "maxBusyScore", 1.0);
  p.string("requestTimeout");  // llm-d: deprecated, ignored (sluice knows when a request ends)
  if (p.string("inFlightLoadProducerName"))
    find_load_producer(p, ctx);  // checked; counts are
                                 // the dispatcher's
  p.finish();
  return std::make_unique<ActiveRequestScorer>(static_cast<std::uint32_t>(idle), busy);
}

std::unique_ptr<Plugin> make_load_aware_scorer(PluginParams& p, PluginContext&) {
  auto t =
      p.integer("threshold", INT64_MIN, INT64_MAX).value_or(LoadAwareScorer::kDefaultThreshold);
  if (t < 0) p.fail("threshold", "must not be negative (0: the default, 128)");
  if (t == 0) t = LoadAwareScorer::kDefaultThreshold;
  const bool dispatched = p.boolean("countDispatchedSinceScrape").value_or(false);
  p.finish();
  return std::make_unique<LoadAwareScorer>(static_cast<double>(t), dispatched);
}

std::unique_ptr<Plugin> make_no_hit_lru_scorer(PluginParams& p, PluginContext& ctx) {
  auto size = p.integer("lruSize", INT64_MIN, 1 << 20).value_or(NoHitLruScorer::kDefaultLruSize);
  if (size < 0) p.fail("lruSize", "must not be negative (0: the default, 1024)");
  if (size == 0) size = NoHitLruScorer::kDefaultLruSize;
  p.string("prefixPluginType");  // llm-d: deprecated, the producer is found by name
  p.string("prefixPluginName");
  auto* prefix = require_prefix_producer(p, ctx, NoHitLruScorer::kType);
  p.finish();
  return std::make_unique<NoHitLruScorer>(prefix, static_cast<std::uint32_t>(size));
}

AffinityParams read_affinity_params(PluginParams& p) {
  AffinityParams a;
  a.affinity_threshold = unit(p, "affinityThreshold", a.affinity_threshold);
  a.exploration_probability = unit(p, "explorationProbability", a.exploration_probability);
  a.max_ttft_penalty_ms = non_negative(p, "maxTTFTPenaltyMs", a.max_ttft_penalty_ms);
  a.peak_prefill_throughput = non_negative(p, "peakPrefillThroughput", a.peak_prefill_throughput);
  if (a.max_ttft_penalty_ms > 0 && a.peak_prefill_throughput == 0)
    p.fail("peakPrefillThroughput", "must be greater than 0 while maxTTFTPenaltyMs is");
  if (auto v = p.integer("maxTokensInFlightPenalty", INT64_MIN, INT64_MAX)) {
    if (*v < 0) p.fail("maxTokensInFlightPenalty", "must not be negative");
    a.max_tokens_in_flight_penalty = static_cast<std::uint64_t>(*v);
  }
  if (auto v = p.string("ttftSource"); v && *v != "prefillThroughput") {
    if (*v == "latencyPredictor")
      p.fail("ttftSource",
             "latencyPredictor needs llm-d's predicted-latency-producer, which sluice does not "
             "have: use prefillThroughput");
    p.fail("ttftSource", "must be prefillThroughput or latencyPredictor, got '" + *v + "'");
  }
  for (const char* key :
       {"prefillCalibrationFile", "prefillCalibrationFingerprint", "prefillCalibrationRequired"})
    if (p.take(key))
      p.fail(key, "calibration records are not supported: set peakPrefillThroughput");
  return a;
}

std::unique_ptr<Plugin> make_prefix_cache_affinity_filter(PluginParams& p, PluginContext& ctx) {
  const AffinityParams a = read_affinity_params(p);
  auto* prefix = require_prefix_producer(p, ctx, PrefixCacheAffinityFilter::kType);
  const bool gated = a.max_ttft_penalty_ms > 0 || a.max_tokens_in_flight_penalty > 0;
  InFlightLoadProducer* load = gated
                                   ? require_load_producer(p, ctx, PrefixCacheAffinityFilter::kType)
                                   : find_load_producer(p, ctx);
  p.string("latencyPredictionInfoProducerName");  // with ttftSource latencyPredictor only
  p.finish();
  return std::make_unique<PrefixCacheAffinityFilter>(a, prefix, load, std::random_device{}());
}

}  // namespace

void add_load_plugins(ExtensionRegistry& r) {
  using K = ExtensionKind;
  r.add<Plugin>(K::kDataProducer, std::string(InFlightLoadProducer::kType),
                make_inflight_load_producer);
  r.add<Plugin>(K::kScorer, std::string(TokenLoadScorer::kType), make_token_load_scorer);
  r.add<Plugin>(K::kScorer, std::string(ActiveRequestScorer::kType), make_active_request_scorer);
  r.add<Plugin>(K::kScorer, std::string(LoadAwareScorer::kType), make_load_aware_scorer);
  r.add<Plugin>(K::kScorer, std::string(NoHitLruScorer::kType), make_no_hit_lru_scorer);
  r.add<Plugin>(K::kFilter, std::string(PrefixCacheAffinityFilter::kType),
                make_prefix_cache_affinity_filter);
}

}  // namespace sluice
