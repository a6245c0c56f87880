// llm-d's prefix parameters from config (issue 40, item 2): renamed and new
// parameters, and errors naming the plugin a parameter belongs to.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/prefix_hasher.h"
#include "scheduling_test_util.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::unique_ptr<Scheduler> build(const std::string& yaml) {
  return build_scheduler(config::load_config_string(yaml, "test.yaml"));
}

std::string build_error(const std::string& yaml) {
  try {
    build(yaml);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
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
}

}  // namespace
}  // namespace sluice::scheduling
