// llm-d v1.0's EndpointPickerConfig document (issue 40, item 1) and the
// plugin types sluice does not build (item 4).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "config/config.h"
#include "config/llmd_plugins.h"
#include "sluice/extensions.h"
#include "unit/config_errors.h"

namespace sluice::config {
namespace {

using namespace std::chrono_literals;

constexpr auto* error_of = &unit::load_error;

const std::string kPlugins = R"(plugins:
- type: queue-scorer
- type: max-score-picker
- type: single-profile-handler
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
)";

TEST(LlmdDocument, ApiVersionV1LoadsInEveryShapeLlmdReads) {
  // v1 regrouped two dataLayer sections; the v1alpha1 layout the guides
  // keep loads under v1 too.
  for (const std::string data_layer :
       {"dataLayer:\n  injectDefaults: false\n  discovery:\n    endpoints:\n"
        "      pluginRef: notify\n  crossReplica:\n    syncInterval: 500ms\n",
        "dataLayer:\n  discovery:\n    pluginRef: notify\n  crossReplicaSyncInterval: 500ms\n",
        ""}) {
    const std::string text =
        "apiVersion: llm-d.ai/v1\nkind: EndpointPickerConfig\n"
        "plugins:\n- type: endpoint-notification-source\n  name: notify\n" +
        kPlugins.substr(std::string("plugins:\n").size()) + data_layer +
        "flowControl:\n  maxRequests: 1k\n  defaultRequestTTL: 30s\n"
        "requestHandler:\n  propagatePriority: true\n";
    Config c;
    ASSERT_NO_THROW(c = load_config_string(text, "v1.yaml")) << text;
    EXPECT_EQ(c.api_version, "llm-d.ai/v1");
    EXPECT_EQ(c.flow_control.max_requests, 1000u);
    EXPECT_TRUE(c.request_handler.propagate_priority);
  }
  EXPECT_NE(error_of("apiVersion: llm-d.ai/v2\n").find("unsupported 'llm-d.ai/v2'"),
            std::string::npos);
}

TEST(LlmdDocument, FeatureGatesTakeNameEqualsTrueOrFalse) {
  auto c = load_config_string("featureGates: [flowControl=true]\n", "t.yaml");
  EXPECT_TRUE(c.flow_control.enabled);
  c = load_config_string("featureGates: [\"flowControl=false\"]\n", "t.yaml");
  EXPECT_FALSE(c.flow_control.enabled);
  const auto e = error_of("featureGates: [flowControl=yes]\n");
  EXPECT_NE(e.find("test.yaml:1: featureGates[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("name=true or name=false"), std::string::npos) << e;
}

TEST(LlmdDocument, RequestHandlerParsers) {
  auto c = load_config_string(
      "plugins:\n- type: openai-parser\n- type: passthrough-parser\n"
      "requestHandler:\n  parsers:\n  - pluginRef: openai-parser\n"
      "  - pluginRef: passthrough-parser\n",
      "t.yaml");
  EXPECT_TRUE(c.request_handler.openai);
  EXPECT_TRUE(c.request_handler.passthrough);
  c = load_config_string(
      "plugins:\n- type: passthrough-parser\n  name: raw\n"
      "requestHandler:\n  parsers:\n  - pluginRef: raw\n",
      "t.yaml");
  EXPECT_FALSE(c.request_handler.openai);
  EXPECT_TRUE(c.request_handler.passthrough);
  // Without the section: the OpenAI paths only (sluice's default; see
  // docs/configuration.md for why not llm-d's trailing passthrough).
  c = load_config_string("", "t.yaml");
  EXPECT_TRUE(c.request_handler.openai);
  EXPECT_FALSE(c.request_handler.passthrough);
}

TEST(LlmdDocument, TwoParsersAreRefusedNamingBoth) {
  // Two of one kind.
  auto e = error_of(
      "plugins:\n- type: openai-parser\n  name: a\n- type: openai-parser\n  name: b\n"
      "requestHandler:\n  parsers:\n  - pluginRef: a\n  - pluginRef: b\n");
  EXPECT_NE(e.find("test.yaml:9: requestHandler.parsers[1].pluginRef"), std::string::npos) << e;
  EXPECT_NE(e.find("'a' and 'b' are both openai-parser"), std::string::npos) << e;
  // One after the fallback (llm-d skips it without a word).
  e = error_of(
      "plugins:\n- type: openai-parser\n- type: passthrough-parser\n"
      "requestHandler:\n  parsers:\n  - pluginRef: passthrough-parser\n"
      "  - pluginRef: openai-parser\n");
  EXPECT_NE(e.find("test.yaml:7: requestHandler.parsers[1].pluginRef"), std::string::npos) << e;
  EXPECT_NE(e.find("'openai-parser' comes after passthrough-parser 'passthrough-parser'"),
            std::string::npos)
      << e;
  // GIE's top-level parser: beside requestHandler.parsers.
  e = error_of(
      "plugins:\n- type: openai-parser\nparser:\n  pluginRef: openai-parser\n"
      "requestHandler:\n  parsers:\n  - pluginRef: openai-parser\n");
  EXPECT_NE(e.find("two parsers: the top-level parser: and requestHandler.parsers"),
            std::string::npos)
      << e;
  // Not a parser at all.
  e = error_of(
      "plugins:\n- type: queue-scorer\nrequestHandler:\n  parsers:\n  - pluginRef: queue-scorer\n");
  EXPECT_NE(e.find("'queue-scorer' is a queue-scorer, not a parser"), std::string::npos) << e;
}

TEST(LlmdDocument, PassthroughAloneWithAPluginThatReadsTheBodyNamesBoth) {
  const auto e = error_of(
      "plugins:\n- type: passthrough-parser\n- type: prefix-cache-scorer\n  name: prefix\n"
      "requestHandler:\n  parsers:\n  - pluginRef: passthrough-parser\n");
  EXPECT_NE(e.find("test.yaml:7: requestHandler.parsers"), std::string::npos) << e;
  EXPECT_NE(e.find("passthrough-parser forwards bodies unread, and plugin 'prefix' "
                   "(prefix-cache-scorer, line 3) reads the body"),
            std::string::npos)
      << e;
  // With openai-parser first, the OpenAI paths feed it: fine.
  EXPECT_EQ(error_of("plugins:\n- type: openai-parser\n- type: passthrough-parser\n"
                     "- type: prefix-cache-scorer\nrequestHandler:\n  parsers:\n"
                     "  - pluginRef: openai-parser\n  - pluginRef: passthrough-parser\n"),
            "");
}

TEST(LlmdDocument, PerBandDefaultRequestTtl) {
  auto c = load_config_string(
      "featureGates: [flowControl]\nflowControl:\n  defaultRequestTTL: 30s\n"
      "  defaultPriorityBand:\n    defaultRequestTTL: 5s\n"
      "  priorityBands:\n  - priority: 10\n    defaultRequestTTL: 0s\n"
      "  - priority: 5\n    defaultRequestTTL: 2s\n  - priority: 1\n",
      "t.yaml");
  const auto& fc = c.flow_control;
  ASSERT_EQ(fc.bands.size(), 3u);
  EXPECT_TRUE(fc.bands[0].ttl_set);  // 0s: no TTL in this band
  EXPECT_FALSE(fc.bands[0].ttl.has_value());
  EXPECT_EQ(fc.bands[1].ttl, std::optional<nanoseconds>(2s));
  // A band without its own takes the template's (as any other field).
  EXPECT_TRUE(fc.bands[2].ttl_set);
  EXPECT_EQ(fc.bands[2].ttl, std::optional<nanoseconds>(5s));
  EXPECT_EQ(fc.default_request_ttl, std::optional<nanoseconds>(30s));
  const auto e =
      error_of("flowControl:\n  priorityBands:\n  - priority: 1\n    defaultRequestTTL: -1s\n");
  EXPECT_NE(e.find("test.yaml:4: flowControl.priorityBands[0].defaultRequestTTL"),
            std::string::npos)
      << e;
}

// Item 6: a band is bounded as llm-d's are (5000 requests), and 0 in the
// file is that default, not "unlimited".
TEST(LlmdDocument, ABandHoldsFiveThousandRequestsByDefault) {
  auto c = load_config_string(
      "featureGates: [flowControl]\nflowControl:\n  priorityBands:\n  - priority: 1\n"
      "  - priority: 2\n    maxRequests: 0\n  - priority: 3\n    maxRequests: 7\n",
      "t.yaml");
  const auto& fc = c.flow_control;
  ASSERT_EQ(fc.bands.size(), 3u);
  EXPECT_EQ(fc.default_band.max_requests, 5000u);
  EXPECT_EQ(fc.bands[0].max_requests, 5000u);
  EXPECT_EQ(fc.bands[1].max_requests, 5000u);
  EXPECT_EQ(fc.bands[2].max_requests, 7u);
}

TEST(LlmdDocument, UnsupportedPluginsFailInOneMessageNamingEachWithItsAlternative) {
  const auto e = error_of(
      "plugins:\n- type: queue-scorer\n- type: tokenizer\n  parameters:\n    socket: /x\n"
      "- type: precise-prefix-cache-scorer\n- type: predicted-latency-producer\n"
      "- type: disaggregatedset-rollout-screener\n");
  EXPECT_NE(e.find("4 llm-d plugin types sluice does not support"), std::string::npos) << e;
  EXPECT_NE(e.find("line 3: tokenizer needs a tokenizer sidecar on a unix socket; instead:"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("line 6: precise-prefix-cache-scorer needs the engines' KV-cache events over "
                   "ZMQ, and a tokenizer; instead: prefix-cache-scorer"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("line 7: predicted-latency-producer needs a trained latency predictor"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("line 8: disaggregatedset-rollout-screener needs the objects of llm-d's "
                   "DisaggregatedSet Kubernetes controller"),
            std::string::npos)
      << e;
  // A type nobody knows is still that.
  EXPECT_NE(error_of("plugins:\n- type: no-such-plugin\n").find("unknown plugin type"),
            std::string::npos);
}

TEST(LlmdDocument, NoTypeIsBothBuiltAndListedAsUnsupported) {
  for (const auto& e : kUnsupportedLlmdPlugins)
    EXPECT_EQ(builtin_extension(e.type), nullptr) << e.type;
}

// docs/configuration.md lists every llm-d plugin type, supported or not: a
// type sluice builds or refuses that the page does not name is a page that
// lags the code.
TEST(LlmdDocument, TheConfigurationPageListsEveryLlmdPluginType) {
  std::ifstream in(SLUICE_DOCS_DIR "/configuration.md");
  ASSERT_TRUE(in) << SLUICE_DOCS_DIR "/configuration.md";
  std::stringstream page;
  page << in.rdbuf();
  const std::string text = page.str();
  const auto table = text.find("## llm-d plugin types");
  ASSERT_NE(table, std::string::npos) << "no '## llm-d plugin types' section";
  const std::string section = text.substr(table, text.find("\n## ", table + 1) - table);
  for (const auto& e : kUnsupportedLlmdPlugins)
    EXPECT_NE(section.find("| `" + std::string(e.type) + "` |"), std::string::npos) << e.type;
  for (const auto& e : kBuiltinExtensionTypes) {
    if (!e.declarable) continue;
    EXPECT_NE(section.find("| `" + std::string(e.type) + "` |"), std::string::npos) << e.type;
  }
}

}  // namespace
}  // namespace sluice::config
