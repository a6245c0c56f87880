#include "config/config.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace sluice::config {
namespace {

using namespace std::chrono_literals;

// Loads text and returns the error message, or "" if it loaded.
std::string error_of(const std::string& text) {
  try {
    load_config_string(text, "test.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, EmptyIsAllDefaults) {
  auto c = load_config_string("", "empty.yaml");
  EXPECT_EQ(c.server.listen, "127.0.0.1:8080");
  EXPECT_EQ(c.server.max_body_bytes, 8u << 20);
  EXPECT_EQ(c.server.max_header_bytes, 16u << 10);
  EXPECT_TRUE(c.endpoints.empty());
}

TEST(Config, SluiceSections) {
  auto c = load_config_string(R"(
server:
  listen: 127.0.0.1:0
  threads: 2
  maxBodyBytes: 1Mi
  maxHeaderBytes: 4Ki
  headerReadTimeout: 250ms
  upstreamIdleTimeout: 2m
endpoints:
  - address: 127.0.0.1:8001
    engine: sglang
    labels: {llm-d.ai/role: decode, rack: r1}
  - address: localhost:8002
objectives:
  - name: interactive
    priority: 100
    ttl: 30s
  - name: best-effort
    priority: -10
flows:
  - id: tenant-a
    weight: 2
)");
  EXPECT_EQ(c.server.threads, 2);
  EXPECT_EQ(c.server.max_body_bytes, 1u << 20);
  EXPECT_EQ(c.server.max_header_bytes, 4096u);
  EXPECT_EQ(c.server.header_read_timeout, std::chrono::nanoseconds(250ms));
  EXPECT_EQ(c.server.upstream_idle_timeout, std::chrono::nanoseconds(120s));
  ASSERT_EQ(c.endpoints.size(), 2u);
  EXPECT_EQ(c.endpoints[0].engine, "sglang");
  EXPECT_EQ(c.endpoints[0].labels.at("rack"), "r1");
  EXPECT_EQ(c.endpoints[1].host, "localhost");
  EXPECT_EQ(c.endpoints[1].port, 8002);
  EXPECT_EQ(c.endpoints[1].engine, "vllm");
  ASSERT_EQ(c.objectives.size(), 2u);
  EXPECT_EQ(c.objectives[0].priority, 100);
  EXPECT_EQ(c.objectives[0].ttl, std::chrono::nanoseconds(30s));
  EXPECT_FALSE(c.objectives[1].ttl.has_value());
  ASSERT_EQ(c.flows.size(), 1u);
  EXPECT_DOUBLE_EQ(c.flows[0].weight, 2.0);
}

TEST(Config, UnknownFieldNamesPathAndLine) {
  EXPECT_EQ(error_of("server:\n  listen: 127.0.0.1:1\n  maxBodyByte: 5\n"),
            "test.yaml:3: server.maxBodyByte: unknown field");
  EXPECT_EQ(error_of("endpoints:\n  - address: 127.0.0.1:1\n    weight: 3\n"),
            "test.yaml:3: endpoints[0].weight: unknown field");
  EXPECT_EQ(error_of("bogus: 1\n"), "test.yaml:1: bogus: unknown field");
}

TEST(Config, BadValuesNamePathAndLine) {
  EXPECT_EQ(error_of("server:\n  headerReadTimeout: abc\n"),
            "test.yaml:2: server.headerReadTimeout: expected a duration like 500ms or 30s, got 'abc'");
  EXPECT_EQ(error_of("server:\n  maxBodyBytes: lots\n"),
            "test.yaml:2: server.maxBodyBytes: expected a size like 5000 or 8Mi, got 'lots'");
  EXPECT_EQ(error_of("endpoints:\n  - address: nowhere\n"),
            "test.yaml:2: endpoints[0].address: expected HOST:PORT, got 'nowhere'");
  EXPECT_EQ(error_of("endpoints:\n  - engine: vllm\n"), "test.yaml:2: endpoints[0].address: is required");
  EXPECT_EQ(error_of("endpoints:\n  - address: 1.2.3.4:5\n    engine: tgi\n"),
            "test.yaml:3: endpoints[0].engine: unknown engine 'tgi' (expected vllm, sglang or trtllm-serve)");
  EXPECT_EQ(error_of("flows:\n  - id: a\n    weight: 0\n"),
            "test.yaml:3: flows[0].weight: must be greater than 0 and at most 1000000");
  EXPECT_EQ(error_of("objectives:\n  - name: x\n    ttl: abc\n"),
            "test.yaml:3: objectives[0].ttl: expected a duration like 500ms or 30s, got 'abc'");
  EXPECT_EQ(error_of("server:\n  threads: -1\n"), "test.yaml:2: server.threads: must be between 0 and 256");
  EXPECT_EQ(error_of("endpoints:\n  - address: 1.2.3.4:5\n  - address: 1.2.3.4:5\n"),
            "test.yaml:3: endpoints[1].address: duplicate endpoint 1.2.3.4:5");
  EXPECT_EQ(error_of("kind: Deployment\n"),
            "test.yaml:1: kind: unsupported 'Deployment' (expected EndpointPickerConfig)");
}

TEST(Config, SyntaxErrorNamesLine) {
  auto e = error_of("server:\n  listen: [1,\n");
  EXPECT_NE(e.find("test.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("(syntax)"), std::string::npos) << e;
}

TEST(Config, ProfileMustReferToDeclaredPlugin) {
  EXPECT_EQ(error_of("plugins:\n  - type: queue-scorer\nschedulingProfiles:\n  - name: d\n    plugins:\n"
                     "      - pluginRef: kv-scorer\n"),
            "test.yaml:6: schedulingProfiles[0].plugins[0].pluginRef: refers to 'kv-scorer', which is "
            "not in plugins");
}

TEST(Config, MissingFile) {
  EXPECT_THROW(load_config_file("/nonexistent/sluice.yaml"), ConfigError);
}

// The real GIE and llm-d configs must load unchanged.
TEST(Config, GieFixturesLoadUnchanged) {
  std::filesystem::path dir = SLUICE_FIXTURES_DIR;
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    Config c;
    ASSERT_NO_THROW(c = load_config_file(entry.path().string()));
    EXPECT_EQ(c.kind, "EndpointPickerConfig");
    EXPECT_FALSE(c.plugins.empty());
    EXPECT_FALSE(c.scheduling_profiles.empty());
    ++loaded;
  }
  EXPECT_GE(loaded, 4);
}

TEST(Config, PdFixtureDetails) {
  auto c = load_config_file(std::string(SLUICE_FIXTURES_DIR) + "/llmd-pd-epp-config.yaml");
  ASSERT_EQ(c.scheduling_profiles.size(), 2u);
  EXPECT_EQ(c.scheduling_profiles[0].name, "prefill");
  EXPECT_EQ(c.scheduling_profiles[0].plugins[2].plugin_ref, "prefix-cache-scorer");
  EXPECT_EQ(c.scheduling_profiles[0].plugins[2].weight, 2.0);
  EXPECT_EQ(c.plugins[0].parameters["lruCapacityPerServer"].as<int>(), 31250);
}

TEST(Config, DemoAndExampleConfigsLoad) {
  for (const char* name : {"demo.yaml", "example.yaml"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(load_config_file(std::string(SLUICE_CONFIG_DIR) + "/" + name));
  }
}

}  // namespace
}  // namespace sluice::config
