// llm-d's load and prefix plugins from config (issue 40): renamed and new
// parameters, one config error per out-of-range parameter (naming the file,
// line, plugin and field), errors naming the plugin a parameter belongs to,
// and the plugin sets llm-d's configs use loading into a working scheduler.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/prefix_hasher.h"
#include "scheduling_test_util.h"
#include "support/fixture_text.h"
#include "unit/config_errors.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::unique_ptr<Scheduler> build(const std::string& yaml) {
  return build_scheduler(config::load_config_string(yaml, "test.yaml"));
}

std::string build_error(const std::string& yaml) {
  return unit::config_error_of([&] { build(yaml); }, "(no error)");
}

// One plugin of `type` with `params` (YAML lines indented 4), after a
// prefix producer and an inflight-load-producer; the plugin's parameters
// start on line 7.
std::string one(const std::string& type, const std::string& params) {
  return "plugins:\n"
         "- type: approx-prefix-cache-producer\n"
         "- type: inflight-load-producer\n"
         "- type: " +
         type +
         "\n"
         "  name: p\n"
         "  parameters:\n" +
         params;
}

std::uint32_t max_blocks(const std::string& producer_params) {
  return build("plugins:\n- type: approx-prefix-cache-producer\n  parameters:\n" + producer_params)
      ->preparation()
      .max_prefix_blocks;
}

TEST(LoadConfig, MaxPrefixTokensToMatchWinsOverTheDeprecatedBlocks) {
  EXPECT_EQ(max_blocks("    maxPrefixBlocksToMatch: 10\n"), 10u);
  // 1000 tokens of 16: 62 whole blocks.
  EXPECT_EQ(max_blocks("    maxPrefixTokensToMatch: 1000\n"), 62u);
  // Both: the tokens (320 / 16 = 20), whatever the blocks say.
  EXPECT_EQ(max_blocks("    maxPrefixBlocksToMatch: 10\n    maxPrefixTokensToMatch: 320\n"), 20u);
  EXPECT_EQ(max_blocks("    blockSizeTokens: 64\n    maxPrefixTokensToMatch: 40960\n"), 640u);
  // Tokens 0 leaves the blocks; both 0: no cap (llm-d: the whole prompt).
  EXPECT_EQ(max_blocks("    maxPrefixBlocksToMatch: 10\n    maxPrefixTokensToMatch: 0\n"), 10u);
  EXPECT_EQ(max_blocks("    maxPrefixBlocksToMatch: 0\n    maxPrefixTokensToMatch: 0\n"),
            kUnlimitedPrefixBlocks);
  EXPECT_EQ(build_error("plugins:\n- type: approx-prefix-cache-producer\n  parameters:\n"
                        "    maxPrefixTokensToMatch: 8\n"),
            "test.yaml:4: plugins[approx-prefix-cache-producer].parameters.maxPrefixTokensToMatch: "
            "is below blockSizeTokens (16): no block would be matched");
  EXPECT_EQ(build_error("plugins:\n- type: approx-prefix-cache-producer\n  parameters:\n"
                        "    maxPrefixTokensToMatch: -1\n"),
            "test.yaml:4: plugins[approx-prefix-cache-producer].parameters.maxPrefixTokensToMatch: "
            "must be between 0 and 4294967296");
}

const std::string kTwoProducers =
    "plugins:\n"
    "- type: approx-prefix-cache-producer\n"
    "  name: p1\n"
    "- type: approx-prefix-cache-producer\n"
    "  name: p2\n"
    "- type: prefix-cache-scorer\n"
    "  parameters:\n";

const ApproxPrefixCacheProducer* producer_of(const Scheduler& s) {
  for (const auto& ws : s.profiles()[0].scorers)
    if (auto* p = dynamic_cast<const PrefixCacheScorer*>(ws.scorer)) return p->producer();
  return nullptr;
}

TEST(LoadConfig, PrefixMatchInfoProducerNameNamesTheProducer) {
  auto s = build(kTwoProducers + "    prefixMatchInfoProducerName: p2\n");
  ASSERT_NE(producer_of(*s), nullptr);
  EXPECT_EQ(producer_of(*s)->name(), "p2");
  EXPECT_EQ(producer_of(*build(kTwoProducers + "    producer: p1\n"))->name(), "p1");
  // Both, agreeing: fine.
  EXPECT_EQ(
      producer_of(*build(kTwoProducers + "    producer: p1\n    prefixMatchInfoProducerName: p1\n"))
          ->name(),
      "p1");
  EXPECT_EQ(build_error(kTwoProducers + "    producer: p1\n    prefixMatchInfoProducerName: p2\n"),
            "test.yaml:9: plugins[prefix-cache-scorer].parameters.prefixMatchInfoProducerName: "
            "names 'p2' but producer names 'p1': give one of them");
  EXPECT_EQ(build_error(kTwoProducers + "    prefixMatchInfoProducerName: nope\n"),
            "test.yaml:8: plugins[prefix-cache-scorer].parameters.prefixMatchInfoProducerName: "
            "'nope' is not an approx-prefix-cache-producer");
}

TEST(LoadConfig, MatchLengthWeightIsBetweenZeroAndOne) {
  const std::string head = "plugins:\n- type: prefix-cache-scorer\n  parameters:\n";
  EXPECT_NO_THROW(build(head + "    matchLengthWeight: 0.5\n    matchLengthScaleTokens: 4096\n"));
  EXPECT_EQ(build_error(head + "    matchLengthWeight: 1.5\n"),
            "test.yaml:4: plugins[prefix-cache-scorer].parameters.matchLengthWeight: must be "
            "between 0 and 1");
  EXPECT_EQ(build_error(head + "    matchLengthWeight: -0.1\n"),
            "test.yaml:4: plugins[prefix-cache-scorer].parameters.matchLengthWeight: must be "
            "between 0 and 1");
  EXPECT_EQ(build_error(head + "    matchLengthWeight: 0.5\n    matchLengthScaleTokens: 0\n"),
            "test.yaml:5: plugins[prefix-cache-scorer].parameters.matchLengthScaleTokens: must be "
            "greater than 0 when matchLengthWeight is");
}

// An unknown (or bad) parameter's error names the plugin it was written
// under, in each shape a prefix parameter can reach a plugin.
TEST(LoadConfig, AParameterErrorNamesThePluginItWasWrittenUnder) {
  // A declared producer.
  EXPECT_EQ(build_error("plugins:\n- type: approx-prefix-cache-producer\n  parameters:\n"
                        "    bogus: 1\n"),
            "test.yaml:4: plugins[approx-prefix-cache-producer].parameters.bogus: unknown field");
  // A scorer whose producer is made from its parameters: the scorer, not
  // the producer made for it (which named itself before).
  EXPECT_EQ(build_error("plugins:\n- type: prefix-cache-scorer\n  name: mine\n  parameters:\n"
                        "    blockSizeTokens: 16\n    bogus: 1\n"),
            "test.yaml:6: plugins[mine].parameters.bogus: unknown field");
  // ... and a bad value of the producer's own fields there.
  EXPECT_EQ(build_error("plugins:\n- type: prefix-cache-scorer\n  name: mine\n  parameters:\n"
                        "    blockSizeTokens: 0\n"),
            "test.yaml:5: plugins[mine].parameters.blockSizeTokens: must be between 1 and 1048576");
  // The scorer's own fields are no longer refused by the producer made for it.
  auto s = build(
      "plugins:\n- type: prefix-cache-scorer\n  parameters:\n"
      "    blockSizeTokens: 32\n    matchLengthWeight: 0.5\n");
  EXPECT_EQ(s->preparation().block_size_tokens, 32u);
  // A parameter on a nested mapping names the plugin and the mapping.
  EXPECT_EQ(build_error("plugins:\n- type: disagg-profile-handler\n  name: pd\n  parameters:\n"
                        "    profiles:\n      decode: d\n      bogus: x\n"
                        "schedulingProfiles:\n- name: d\n  plugins: []\n"),
            "test.yaml:7: plugins[pd].parameters.profiles.bogus: unknown field");
  // A load plugin's.
  EXPECT_EQ(build_error(one("token-load-scorer", "    bogus: 1\n")),
            "test.yaml:7: plugins[p].parameters.bogus: unknown field");
}

// One config error per out-of-range parameter: file, line, plugin, field.
TEST(LoadConfig, OutOfRangeParametersAreConfigErrors) {
  const std::pair<std::string, std::string> cases[][2] = {
      {{"prefix-cache-affinity-filter", "    affinityThreshold: 1.5\n"},
       {"affinityThreshold", "must be between 0 and 1"}},
      {{"prefix-cache-affinity-filter", "    affinityThreshold: -0.1\n"},
       {"affinityThreshold", "must be between 0 and 1"}},
      {{"prefix-cache-affinity-filter", "    explorationProbability: 1.01\n"},
       {"explorationProbability", "must be between 0 and 1"}},
      {{"prefix-cache-affinity-filter", "    maxTTFTPenaltyMs: -1\n"},
       {"maxTTFTPenaltyMs", "must not be negative"}},
      {{"prefix-cache-affinity-filter", "    maxTokensInFlightPenalty: -1\n"},
       {"maxTokensInFlightPenalty", "must not be negative"}},
      {{"prefix-cache-affinity-filter", "    peakPrefillThroughput: -5\n"},
       {"peakPrefillThroughput", "must not be negative"}},
      {{"prefix-cache-affinity-filter", "    peakPrefillThroughput: 0\n"},
       {"peakPrefillThroughput", "must be greater than 0 while maxTTFTPenaltyMs is"}},
      {{"prefix-cache-affinity-filter", "    ttftSource: latencyPredictor\n"},
       {"ttftSource",
        "latencyPredictor needs llm-d's predicted-latency-producer, which sluice does not have: "
        "use prefillThroughput"}},
      {{"prefix-cache-affinity-filter", "    prefillCalibrationFile: /etc/c.json\n"},
       {"prefillCalibrationFile",
        "calibration records are not supported: set peakPrefillThroughput"}},
      {{"token-load-scorer", "    queueThresholdTokens: -1\n"},
       {"queueThresholdTokens", "must not be negative (0: the default, 4194304)"}},
      {{"active-request-scorer", "    maxBusyScore: 1.5\n"},
       {"maxBusyScore", "must be between 0 and 1"}},
      {{"active-request-scorer", "    maxBusyScore: -0.5\n"},
       {"maxBusyScore", "must be between 0 and 1"}},
      {{"active-request-scorer", "    idleThreshold: -1\n"},
       {"idleThreshold", "must not be negative"}},
      {{"load-aware-scorer", "    threshold: -1\n"},
       {"threshold", "must not be negative (0: the default, 128)"}},
      {{"no-hit-lru-scorer", "    lruSize: -1\n"},
       {"lruSize", "must not be negative (0: the default, 1024)"}},
      {{"inflight-load-producer", "    outputRatio: -0.5\n"},
       {"outputRatio", "must not be negative"}},
      {{"inflight-load-producer", "    maxEstimatedOutputTokens: -1\n"},
       {"maxEstimatedOutputTokens", "must not be negative"}},
      {{"inflight-load-producer", "    releasePromptTokensAt: never\n"},
       {"releasePromptTokensAt", "'never' is not firstChunk or completion"}},
  };
  for (const auto& c : cases) {
    const auto& [type, params] = c[0];
    const auto& [field, message] = c[1];
    EXPECT_EQ(build_error(one(type, params)),
              "test.yaml:7: plugins[p].parameters." + field + ": " + message)
        << type << " " << params;
  }
}

TEST(LoadConfig, APluginWithoutTheProducerItNeedsIsAConfigError) {
  EXPECT_EQ(build_error("plugins:\n- type: token-load-scorer\n  name: t\n  parameters: {}\n"),
            "test.yaml:4: plugins[t].parameters: token-load-scorer needs an "
            "inflight-load-producer: declare one in plugins (llm-d requires it listed too)");
  EXPECT_EQ(build_error("plugins:\n- type: no-hit-lru-scorer\n"),
            "test.yaml:2: plugins[no-hit-lru-scorer].parameters: no-hit-lru-scorer needs an "
            "approx-prefix-cache-producer: declare one in plugins (llm-d requires it listed too)");
  EXPECT_EQ(
      build_error("plugins:\n- type: approx-prefix-cache-producer\n"
                  "- type: prefix-cache-affinity-filter\n"),
      "test.yaml:3: plugins[prefix-cache-affinity-filter].parameters: prefix-cache-affinity-filter "
      "needs an inflight-load-producer: declare one in plugins (llm-d requires it listed too)");
  // Without a load gate it needs none.
  EXPECT_NO_THROW(
      build("plugins:\n- type: approx-prefix-cache-producer\n"
            "- type: prefix-cache-affinity-filter\n  parameters:\n"
            "    maxTTFTPenaltyMs: 0\n"));
}

// Schedules `r` on `eps`, dispatches it and returns the target's slot.
std::uint32_t send(Scheduler& s, CycleState& cycle, const Request& r, std::vector<Endpoint>& eps) {
  SchedulingResult res;
  s.schedule(cycle, r, eps, res);
  EXPECT_TRUE(res.ok) << res.error;
  if (!res.ok) return UINT32_MAX;
  s.dispatched(cycle, r, res);
  return res.targets[0]->index;
}

// llm-d/llm-d guides/optimized-baseline/router/optimized-baseline.values.yaml:
// the scorer is declared before the producer it reads.
const std::string kOptimizedBaselineGuide =
    test_support::llmd_fixture("optimized-baseline-guide.yaml");

TEST(LoadConfig, TheOptimizedBaselineGuideLoadsAndSticksToTheWarmEndpoint) {
  auto s = build(kOptimizedBaselineGuide);
  ASSERT_EQ(s->profiles().size(), 1u);
  const Profile& p = s->profiles()[0];
  ASSERT_EQ(p.filters.size(), 1u);
  EXPECT_EQ(p.filters[0].second, "prefix-cache-affinity-filter");
  ASSERT_EQ(p.scorers.size(), 1u);
  EXPECT_EQ(p.scorers[0].name, "token-load-scorer");
  EXPECT_EQ(s->preparation().max_prefix_blocks, 2560u);  // 40960 / 16
  Pool pool;
  for (int i = 0; i < 3; ++i) pool.add("10.0.0." + std::to_string(i) + ":8000");
  auto eps = pool.copy();
  Request r;
  r.model = "m";
  r.input_tokens = 2000;
  compute_prefix_hashes(std::string(64 * 100, 'p'), r.model, s->preparation(), r);
  std::vector<CycleState> cycles(4);
  const std::uint32_t first = send(*s, cycles[0], r, eps);
  // Warm there now: the filter keeps it alone, though it carries the most tokens.
  for (int i = 1; i < 4; ++i) EXPECT_EQ(send(*s, cycles[i], r, eps), first);
  // A new prompt goes by token load: never to the loaded endpoint.
  Request other = r;
  compute_prefix_hashes(std::string(64 * 100, 'q'), r.model, s->preparation(), other);
  CycleState c;
  EXPECT_NE(send(*s, c, other, eps), first);
  for (auto& cy : cycles) s->completed(cy, r, first, 10);
}

// llm-d-router test/perf/config/router-configs/optimized-baseline.yaml.
const char* kOptimizedBaselinePerf = R"(apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: approx-prefix-cache-producer
  parameters:
    maxPrefixTokensToMatch: 100000
- type: prefix-cache-scorer
- type: no-hit-lru-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: no-hit-lru-scorer
    weight: 2
)";

TEST(LoadConfig, TheNoHitLruBaselineSpreadsColdPromptsOverTheEndpoints) {
  auto s = build(kOptimizedBaselinePerf);
  ASSERT_EQ(s->profiles()[0].scorers.size(), 4u);
  EXPECT_EQ(s->preparation().max_prefix_blocks, 6250u);  // 100000 / 16
  Pool pool;
  for (int i = 0; i < 3; ++i) pool.add("10.0.0." + std::to_string(i) + ":8000");
  auto eps = pool.copy();
  // Three cold prompts on an idle pool: each goes to an endpoint no cold
  // one went to before, so three different endpoints.
  std::vector<std::uint32_t> seen;
  for (char ch : {'a', 'b', 'c'}) {
    Request r;
    r.model = "m";
    compute_prefix_hashes(std::string(64 * 8, ch), r.model, s->preparation(), r);
    CycleState cycle;
    const std::uint32_t to = send(*s, cycle, r, eps);
    for (std::uint32_t before : seen) EXPECT_NE(to, before);
    seen.push_back(to);
  }
}

// llm-d-router deploy/config/sim-epp-no-hit-lru.yaml's shape, with the
// approximate producer in place of the precise one (a KV-event source
// sluice does not have).
TEST(LoadConfig, TheSimNoHitLruShapeLoads) {
  auto s = build(R"(plugins:
- type: approx-prefix-cache-producer
  name: approx
  parameters:
    blockSizeTokens: 5
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: approx
- type: no-hit-lru-scorer
  parameters:
    lruSize: 2048
    prefixMatchInfoProducerName: approx
- type: decode-filter
- type: max-score-picker
- type: single-profile-handler
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: no-hit-lru-scorer
    weight: 1
)");
  EXPECT_EQ(s->profiles()[0].scorers.size(), 2u);
  EXPECT_EQ(s->preparation().block_size_tokens, 5u);
}

TEST(LoadConfig, LoadScorersBuildWithLlmdsDefaults) {
  auto s = build(R"(plugins:
- type: inflight-load-producer
  parameters:
    addEstimatedOutputTokens: true
    outputRatio: 2
    maxEstimatedOutputTokens: 4096
    syncCrossReplicaState: false
    releasePromptTokensAt: completion
- type: active-request-scorer
  parameters:
    idleThreshold: 2
    maxBusyScore: 0.8
    requestTimeout: 2m
- type: load-aware-scorer
  parameters:
    threshold: 0
- type: token-load-scorer
  parameters:
    queueThresholdTokens: 0
)");
  ASSERT_EQ(s->profiles()[0].scorers.size(), 3u);
  Pool pool;
  pool.add("a");
  pool.add("b");
  auto eps = pool.copy();
  eps[0].in_flight = 5;
  eps[0].metrics.waiting_queue_size = 10;
  Request r;
  r.input_tokens = 10;
  CycleState cycle;
  EXPECT_EQ(send(*s, cycle, r, eps), 1u);  // b: idle on every count
  // Released at completion: no request of this scheduler needs its
  // first-byte event sent to the dispatcher.
  EXPECT_FALSE(s->wants_started());
}

// The first-byte event crosses to the dispatcher only when a plugin acts
// on it: inflight-load-producer releasing at the first chunk (llm-d's
// default), not a profile without it.
TEST(LoadConfig, OnlyAFirstChunkReleaseAsksForTheFirstByteEvent) {
  EXPECT_FALSE(build("")->wants_started());
  EXPECT_TRUE(build("plugins:\n- type: inflight-load-producer\n- type: token-load-scorer\n")
                  ->wants_started());
  EXPECT_FALSE(build("plugins:\n- type: inflight-load-producer\n  parameters:\n"
                     "    releasePromptTokensAt: completion\n- type: token-load-scorer\n")
                   ->wants_started());
}

}  // namespace
}  // namespace sluice::scheduling
