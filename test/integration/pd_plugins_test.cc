// llm-d's prefill/decode and topology plugins end to end (issue 40, item 3):
// real sluice in front of sluice-mock endpoints. The decode endpoint is the
// one sluice sends the request to; the prefill endpoint chosen travels to
// it in x-prefiller-host-port, which the mock echoes back as
// x-mock-prefiller-host-port: what the decode endpoint received.
#include <gtest/gtest.h>

#include <string>

#include "harness.h"
#include "support/fixture_text.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

// llm-d/llm-d guides/context-length-aware-pd/router.values.yaml's
// EndpointPickerConfig, as the guides' fixtures hold it.
const std::string kContextLengthPd = test_support::llmd_fixture("context-length-aware-pd.yaml");

std::string prompt_of_chars(std::size_t n, int i) {
  std::string p = "Request " + std::to_string(i) + ": ";
  while (p.size() < n) p += "context for the prefill pool " + std::to_string(i) + " ";
  return p;
}

// Short prompts prefill on the short-context pool, long ones on the
// long-context pool, every one disaggregated (always-disagg), the decode
// endpoint serving each; a stream as well as a whole answer.
TEST(PdPlugins, ContextLengthAwareGuideSendsPrefillByLength) {
  auto p_short = start_mock(), p_long = start_mock(), d1 = start_mock();
  std::string cfg = std::string(kContextLengthPd) +
                    "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n" +
                    "  - address: " + p_short->address() +
                    "\n    labels: {llm-d.ai/role: prefill, llm-d.ai/context-length-range: "
                    "0-2048}\n" +
                    "  - address: " + p_long->address() +
                    "\n    labels: {llm-d.ai/role: prefill, llm-d.ai/context-length-range: "
                    "2049-131072}\n" +
                    "  - address: " + d1->address() + "\n    labels: {llm-d.ai/role: decode}\n";
  TempFile config(cfg);
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 6; ++i) {
    // ~25 tokens, then ~3000 (12,000 characters): either side of 2048.
    const bool longer = i % 2 == 1;
    const bool stream = i >= 4;
    auto r = client.post_json("/v1/completions",
                              completion_body(2, stream, prompt_of_chars(longer ? 12000 : 100, i)));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), d1->address());
    EXPECT_EQ(r.header("x-mock-prefiller-host-port"),
              longer ? p_long->address() : p_short->address())
        << "request " << i;
    if (stream) {
      EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << r.body;
    }
  }
  // A chat completion as well: one word still disaggregates.
  auto r = client.post_json(
      "/v1/chat/completions",
      R"({"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), d1->address());
  EXPECT_EQ(r.header("x-mock-prefiller-host-port"), p_short->address());
}

// llm-d-router's P/D config with always-disagg-pd-decider in place of
// prefix-based-pd-decider: even a two-token prompt, which
// prefix-based-pd-decider (nonCachedTokens: 16) keeps on decode, goes
// through the prefill endpoint.
TEST(PdPlugins, AlwaysDisaggPrefillsEvenTheShortestPrompt) {
  auto p1 = start_mock(), d1 = start_mock();
  std::string cfg = R"(apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: prefill-filter
- type: decode-filter
- type: max-score-picker
- type: always-disagg-pd-decider
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: always-disagg-pd-decider
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
server:
  listen: 127.0.0.1:0
  threads: 1
endpoints:
)";
  cfg += "  - address: " + p1->address() + "\n    labels: {llm-d.ai/role: prefill}\n";
  cfg += "  - address: " + d1->address() + "\n    labels: {llm-d.ai/role: decode}\n";
  TempFile config(cfg);
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 3; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(2, false, "hi"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), d1->address());
    EXPECT_EQ(r.header("x-mock-prefiller-host-port"), p1->address());
  }
}

// A topology-affinity plugin over endpoints that carry no topology label
// is not a silent no-op: sluice warns at startup, and still serves.
TEST(PdPlugins, TopologyPluginWithoutTopologyLabelsWarns) {
  auto m = start_mock();
  TempFile config(R"(plugins:
- type: topology-extractor
- type: topology-affinity-scorer
- type: queue-scorer
- type: max-score-picker
server:
  listen: 127.0.0.1:0
  threads: 1
endpoints:
  - address: )" + m->address() +
                  "\n    labels: {llm-d.ai/role: decode}\n");
  auto sluice = start_sluice(config, {}, /*capture_stderr=*/true);
  EXPECT_TRUE(eventually([&] {
    return sluice->stderr_now().find(
               "topology-affinity-scorer: no endpoint carries a topology "
               "label") != std::string::npos;
  })) << sluice->stderr_now();
  HttpClient client(kHost, sluice->port());
  auto r = client.post_json("/v1/completions", completion_body(2));
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace sluice::test
