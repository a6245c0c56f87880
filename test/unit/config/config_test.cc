#include "config/config.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "support/requires.h"
#include "unit/config_errors.h"

namespace sluice::config {
namespace {

using namespace std::chrono_literals;

// Loads text and returns the error message, or "" if it loaded.
constexpr auto* error_of = &unit::load_error;

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
  EXPECT_EQ(
      error_of("server:\n  headerReadTimeout: abc\n"),
      "test.yaml:2: server.headerReadTimeout: expected a duration like 500ms or 30s, got 'abc'");
  EXPECT_EQ(error_of("server:\n  maxBodyBytes: lots\n"),
            "test.yaml:2: server.maxBodyBytes: expected a size like 5000 or 8Mi, got 'lots'");
  EXPECT_EQ(error_of("endpoints:\n  - address: nowhere\n"),
            "test.yaml:2: endpoints[0].address: expected HOST:PORT, got 'nowhere'");
  EXPECT_EQ(error_of("endpoints:\n  - engine: vllm\n"),
            "test.yaml:2: endpoints[0].address: is required (or dns)");
  EXPECT_EQ(error_of("endpoints:\n  - address: 1.2.3.4:5\n    engine: tgi\n"),
            "test.yaml:3: endpoints[0].engine: unknown engine 'tgi' (expected vllm, sglang or "
            "trtllm-serve)");
  EXPECT_EQ(error_of("flows:\n  - id: a\n    weight: 0\n"),
            "test.yaml:3: flows[0].weight: must be at least 0.000001 and at most 1000000");
  // A tiny weight makes VTC's cost per token overflow (issue 33, rough edge 12).
  EXPECT_EQ(error_of("flows:\n  - id: a\n    weight: 1e-300\n"),
            "test.yaml:3: flows[0].weight: must be at least 0.000001 and at most 1000000");
  EXPECT_EQ(error_of("objectives:\n  - name: x\n    ttl: abc\n"),
            "test.yaml:3: objectives[0].ttl: expected a duration like 500ms or 30s, got 'abc'");
  EXPECT_EQ(error_of("server:\n  threads: -1\n"),
            "test.yaml:2: server.threads: must be between 0 and 256");
  EXPECT_EQ(error_of("server:\n  dispatcher: fast\n"),
            "test.yaml:2: server.dispatcher: must be auto, thread or inline");
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
  EXPECT_EQ(
      error_of("plugins:\n  - type: queue-scorer\nschedulingProfiles:\n  - name: d\n    plugins:\n"
               "      - pluginRef: kv-scorer\n"),
      "test.yaml:6: schedulingProfiles[0].plugins[0].pluginRef: refers to 'kv-scorer', which is "
      "not in plugins");
}

// A number field takes finite numbers only: "nan" and "inf" parse as
// doubles, and a NaN VTC price made a NaN counter that sorts before every
// other, starving the band's other tenants.
TEST(Config, NumbersMustBeFinite) {
  const std::string head =
      "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\n"
      "plugins:\n  - type: vtc-fairness-policy\n    parameters:\n";
  const std::string field = "test.yaml:6: plugins[vtc-fairness-policy].parameters.inputPrice: ";
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity"}) {
    std::string input = head;
    input += "      inputPrice: ";
    input += bad;
    input += "\n";
    std::string expected = field;
    expected += "expected a finite number, got '";
    expected += bad;
    expected += "'";
    EXPECT_EQ(error_of(input), expected) << bad;
  }
  // Out of a double's range: not read as infinity either.
  EXPECT_EQ(error_of(head + "      inputPrice: 1e999\n"), field + "expected a number, got '1e999'");
  EXPECT_EQ(error_of(head + "      outputPrice: 2.5\n"), "");
}

TEST(Config, FlowControlSection) {
  auto c = load_config_string(R"(
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
  - type: round-robin-fairness-policy
  - type: vtc-fairness-policy
    name: vtc
    parameters: {inputPrice: 1, outputPrice: 3}
  - type: edf-ordering-policy
  - type: concurrency-detector
    parameters: {maxConcurrency: 8, headroom: 0.25}
saturationDetector:
  pluginRef: concurrency-detector
flowControl:
  maxBytes: 10Gi
  maxRequests: 1k
  defaultRequestTTL: 30s
  defaultPriorityBand:
    fairnessPolicyRef: round-robin-fairness-policy
  priorityBands:
    - priority: 100
      maxRequests: 50
      orderingPolicyRef: edf-ordering-policy
    - priority: 0
      fairnessPolicyRef: vtc
      antiStarvationShare: 0.05
  displacementPolicy: none
)");
  const auto& fc = c.flow_control;
  EXPECT_TRUE(fc.enabled);
  EXPECT_EQ(fc.max_bytes, 10ull << 30);
  EXPECT_EQ(fc.max_requests, 1000u);
  EXPECT_EQ(fc.default_request_ttl, std::chrono::nanoseconds(30s));
  EXPECT_EQ(fc.default_band.fairness_type, "round-robin-fairness-policy");
  ASSERT_EQ(fc.bands.size(), 2u);
  EXPECT_EQ(fc.bands[0].priority, 100);
  EXPECT_EQ(fc.bands[0].max_requests, 50u);
  EXPECT_EQ(fc.bands[0].max_bytes, 1000000000u);  // GIE's default bound
  EXPECT_EQ(fc.bands[0].ordering_type, "edf-ordering-policy");
  EXPECT_EQ(fc.bands[0].fairness_type, "round-robin-fairness-policy");  // from the template
  EXPECT_EQ(fc.bands[1].fairness_ref, "vtc");
  EXPECT_EQ(fc.bands[1].fairness_type, "vtc-fairness-policy");
  EXPECT_DOUBLE_EQ(fc.bands[1].anti_starvation_share, 0.05);
  EXPECT_FALSE(fc.displacement);
  EXPECT_DOUBLE_EQ(fc.vtc_output_price, 3);
  EXPECT_EQ(c.saturation_detector.type, "concurrency-detector");
  EXPECT_EQ(c.saturation_detector.max_concurrency, 8u);
  EXPECT_DOUBLE_EQ(c.saturation_detector.headroom, 0.25);
}

TEST(Config, FlowControlDefaults) {
  auto c = load_config_string("flowControl: {}\n");
  EXPECT_FALSE(c.flow_control.enabled);  // the gate is off
  EXPECT_TRUE(c.flow_control.displacement);
  EXPECT_EQ(c.flow_control.default_request_ttl, std::chrono::nanoseconds(60s));  // sluice's bound
  EXPECT_FALSE(load_config_string("flowControl: {defaultRequestTTL: 0s}\n")
                   .flow_control.default_request_ttl.has_value());
  // noEndpointRequestTTL (llm-d): unset follows defaultRequestTTL; 0 is no
  // expiry while the pool is empty.
  EXPECT_FALSE(c.flow_control.no_endpoint_ttl_set);
  auto ne = load_config_string("flowControl: {noEndpointRequestTTL: 5m}\n").flow_control;
  EXPECT_TRUE(ne.no_endpoint_ttl_set);
  EXPECT_EQ(ne.no_endpoint_request_ttl, std::chrono::nanoseconds(300s));
  ne = load_config_string("flowControl: {noEndpointRequestTTL: 0s}\n").flow_control;
  EXPECT_TRUE(ne.no_endpoint_ttl_set);
  EXPECT_FALSE(ne.no_endpoint_request_ttl.has_value());
  EXPECT_EQ(c.flow_control.default_band.fairness_type, "global-strict-fairness-policy");
  EXPECT_EQ(c.flow_control.default_band.ordering_type, "fcfs-ordering-policy");
  EXPECT_EQ(c.saturation_detector.type, "utilization-detector");
  EXPECT_EQ(c.saturation_detector.queue_depth_threshold, 5);
  EXPECT_EQ(c.saturation_detector.kv_cache_util_threshold, 0.8);
  EXPECT_EQ(c.saturation_detector.metrics_staleness_threshold, std::chrono::nanoseconds(200ms));
}

TEST(Config, FlowControlBadInputsNameTheField) {
  EXPECT_EQ(
      error_of(
          "flowControl:\n  priorityBands:\n    - priority: 1\n      fairnessPolicyRef: fair-ish\n"),
      "test.yaml:4: flowControl.priorityBands[0].fairnessPolicyRef: unknown fairness policy "
      "'fair-ish' (declare it under plugins:, with type global-strict-fairness-policy, "
      "round-robin-fairness-policy, vtc-fairness-policy or program-aware-fairness)");
  EXPECT_EQ(
      error_of("flowControl:\n  priorityBands:\n    - priority: 1\n      orderingPolicyRef: "
               "edf-ordering-policy\n"),
      "test.yaml:4: flowControl.priorityBands[0].orderingPolicyRef: unknown ordering policy "
      "'edf-ordering-policy' (declare it under plugins:, e.g. '- type: edf-ordering-policy')");
  EXPECT_EQ(
      error_of("plugins:\n  - type: queue-scorer\nflowControl:\n  defaultPriorityBand:\n"
               "    fairnessPolicyRef: queue-scorer\n"),
      "test.yaml:5: flowControl.defaultPriorityBand.fairnessPolicyRef: plugin 'queue-scorer' is "
      "a queue-scorer, not a fairness policy");
  EXPECT_EQ(error_of("flowControl:\n  maxRequests: -5\n"),
            "test.yaml:2: flowControl.maxRequests: expected a size like 5000 or 8Mi, got '-5'");
  EXPECT_EQ(
      error_of("flowControl:\n  priorityBands:\n    - priority: 1\n      maxBytes: -1Ki\n"),
      "test.yaml:4: flowControl.priorityBands[0].maxBytes: expected a size like 5000 or 8Mi, got "
      "'-1Ki'");
  EXPECT_EQ(error_of("flowControl:\n  defaultRequestTTL: abc\n"),
            "test.yaml:2: flowControl.defaultRequestTTL: expected a duration like 500ms or 30s, "
            "got 'abc'");
  EXPECT_EQ(error_of("flowControl:\n  noEndpointRequestTTL: -1s\n"),
            "test.yaml:2: flowControl.noEndpointRequestTTL: expected a duration like 500ms or "
            "30s, got '-1s'");
  EXPECT_EQ(
      error_of("saturationDetector:\n  pluginRef: magic-detector\n"),
      "test.yaml:2: saturationDetector.pluginRef: unknown saturation detector 'magic-detector' "
      "(declare it under plugins:, type utilization-detector or concurrency-detector)");
  EXPECT_EQ(error_of("plugins:\n  - type: utilization-detector\n    parameters: "
                     "{kvCacheUtilThreshold: 1.5}\n"),
            "test.yaml:3: plugins[utilization-detector].parameters.kvCacheUtilThreshold: must be "
            "in (0, 1]");
  EXPECT_EQ(error_of("flowControl:\n  priorityBands:\n    - priority: 1\n    - priority: 1\n"),
            "test.yaml:4: flowControl.priorityBands[1].priority: duplicate band priority 1");
  EXPECT_EQ(error_of("flowControl:\n  priorityBands:\n    - maxRequests: 3\n"),
            "test.yaml:3: flowControl.priorityBands[0].priority: is required");
  EXPECT_EQ(
      error_of("flowControl:\n  displacementPolicy: random\n"),
      "test.yaml:2: flowControl.displacementPolicy: unknown displacement policy 'random' (expected "
      "lowest-band-newest-first or none)");
  EXPECT_EQ(
      error_of(
          "flowControl:\n  priorityBands:\n    - priority: 1\n      antiStarvationShare: 1.5\n"),
      "test.yaml:4: flowControl.priorityBands[0].antiStarvationShare: must be at least 0 and below "
      "1");
  // -0.0 compares equal to 0 but is not a share (issue 33, rough edge 12).
  EXPECT_EQ(
      error_of(
          "flowControl:\n  priorityBands:\n    - priority: 1\n      antiStarvationShare: -0.0\n"),
      "test.yaml:4: flowControl.priorityBands[0].antiStarvationShare: must be at least 0 and below "
      "1");
  EXPECT_EQ(
      error_of("featureGates: [flowControll]\n"),
      "test.yaml:1: featureGates[0]: unknown feature gate 'flowControll' (expected flowControl, "
      "dataLayer, prepareDataPlugins or enableLegacyMetrics)");
  EXPECT_EQ(error_of("plugins:\n  - type: queue-scorer\n  - type: qeueu-scorer\n").substr(0, 73),
            "test.yaml:3: plugins[1].type: unknown plugin type 'qeueu-scorer' (known: ");
  EXPECT_EQ(error_of("flowControl:\n  maxBytes: 1Gi\n  bogus: 1\n"),
            "test.yaml:3: flowControl.bogus: unknown field");
}

TEST(Config, MissingFile) {
  EXPECT_THROW(load_config_file("/nonexistent/sluice.yaml"), ConfigError);
}

// The real GIE and llm-d configs must load unchanged.
TEST(Config, GieFixturesLoadUnchanged) {
  // ../shared/ is outside the repository: a checkout without it skips,
  // saying so, under make test too (it is not a package install-deps.sh
  // can install).
  if (!std::filesystem::is_directory(SLUICE_FIXTURES_DIR))
    GTEST_SKIP() << "needs ../shared/fixtures/gie next to the project (" << SLUICE_FIXTURES_DIR
                 << "), which this checkout does not have";
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
  // ../shared/ is outside the repository: a checkout without it skips,
  // saying so, under make test too (it is not a package install-deps.sh
  // can install).
  if (!std::filesystem::is_directory(SLUICE_FIXTURES_DIR))
    GTEST_SKIP() << "needs ../shared/fixtures/gie next to the project (" << SLUICE_FIXTURES_DIR
                 << "), which this checkout does not have";
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

// yaml-cpp keeps both entries of a repeated key and reads the first; sluice
// refuses the file, naming the second one's line and path, in every mapping.
TEST(Config, DuplicateKeysAreErrors) {
  EXPECT_EQ(error_of("server:\n  listen: 127.0.0.1:1\nserver:\n  threads: 2\n"),
            "test.yaml:3: server: duplicate key (first at line 1)");
  EXPECT_EQ(error_of("server:\n  listen: 127.0.0.1:1\n  threads: 2\n  listen: 127.0.0.1:2\n"),
            "test.yaml:4: server.listen: duplicate key (first at line 2)");
  EXPECT_EQ(error_of("endpoints:\n  - address: 127.0.0.1:1\n    engine: vllm\n"
                     "    engine: sglang\n"),
            "test.yaml:4: endpoints[0].engine: duplicate key (first at line 3)");
  EXPECT_EQ(error_of("endpoints:\n  - address: 127.0.0.1:1\n    labels: {role: a, role: b}\n"),
            "test.yaml:3: endpoints[0].labels.role: duplicate key (first at line 3)");
  EXPECT_EQ(error_of("plugins:\n  - type: prefix-cache-scorer\n    parameters:\n"
                     "      blockSize: 16\n      blockSize: 64\n"),
            "test.yaml:5: plugins[0].parameters.blockSize: duplicate key (first at line 4)");
  EXPECT_EQ(error_of("flowControl:\n  priorityBands:\n    - priority: 1\n      maxBytes: 1Mi\n"
                     "      priority: 2\n"),
            "test.yaml:5: flowControl.priorityBands[0].priority: duplicate key (first at line 3)");
  // Sections sluice only passes through are checked as well.
  EXPECT_EQ(error_of("dataLayer:\n  sources: []\n  sources: [x]\n"),
            "test.yaml:3: dataLayer.sources: duplicate key (first at line 2)");
  // The same key in two different mappings is fine.
  EXPECT_EQ(error_of("server:\n  listen: 127.0.0.1:1\nendpoints:\n  - address: 127.0.0.1:1\n"
                     "  - address: 127.0.0.1:2\n"),
            "");
}

// A key that is not a plain value is a ConfigError, not a YAML exception
// escaping the loader; aliases (even a cycle) are walked once.
TEST(Config, OddKeysAndAliases) {
  EXPECT_EQ(error_of("[server]: 1\n"),
            "test.yaml:1: (top level): a key must be a plain value, not a list, mapping or null");
  EXPECT_EQ(error_of("parser:\n  {a: 1}: x\n"),
            "test.yaml:2: parser: a key must be a plain value, not a list, mapping or null");
  EXPECT_EQ(error_of("parser: &p\n  self: *p\n"), "");
  EXPECT_EQ(error_of("parser:\n  a: &m {k: 1}\n  b: *m\n  c: *m\n"), "");
  EXPECT_EQ(error_of("parser:\n  a: &m {k: 1, k: 2}\n  b: *m\n"),
            "test.yaml:2: parser.a.k: duplicate key (first at line 2)");
}

// A file under a fresh temporary directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-config-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& contents) const {
    const auto path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

std::string config_file_error(const std::string& path) {
  try {
    load_config_file(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string endpoints_file_error(const std::string& path) {
  try {
    load_endpoints_file(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(EndpointsFile, EntriesKnowTheirLineAndDuplicateKeysAreErrors) {
  TempDir dir;
  auto path = dir.write("endpoints.yaml",
                        "# pool\nendpoints:\n  - address: 127.0.0.1:1\n  - address: h:2\n");
  auto eps = load_endpoints_file(path);
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].line, 3);
  EXPECT_EQ(eps[1].line, 4);
  // The line is where the entry is, not what it is.
  auto moved = eps[0];
  moved.line = 9;
  EXPECT_EQ(moved, eps[0]);

  path = dir.write("dup.yaml", "endpoints:\n  - address: 127.0.0.1:1\nendpoints: []\n");
  EXPECT_EQ(endpoints_file_error(path), path + ":3: endpoints: duplicate key (first at line 1)");
  path = dir.write("dup2.yaml", "endpoints:\n  - address: 127.0.0.1:1\n    address: 127.0.0.1:2\n");
  EXPECT_EQ(endpoints_file_error(path),
            path + ":3: endpoints[0].address: duplicate key (first at line 2)");
}

// The model servers' credential files: read at load, the token checked,
// an error naming the file and never quoting it.
TEST(UpstreamCredential, FilesAreReadCheckedAndNamed) {
  TempDir dir;
  const auto pool = dir.write("pool.token", "pool-secret \n");
  const auto own = dir.write("own.token", "own-secret");
  auto c = load_config_string("server:\n  upstreamCredentialFile: " + pool +
                              "\nendpoints:\n  - address: h:1\n  - address: h:2\n"
                              "    credentialFile: " +
                              own + "\n");
  EXPECT_EQ(c.server.upstream_credential, "pool-secret");
  const auto creds = upstream_credentials(c);
  EXPECT_EQ(creds.for_address("h:1"), "Bearer pool-secret");
  EXPECT_EQ(creds.for_address("h:2"), "Bearer own-secret");
  EXPECT_EQ(creds.for_address("h:3"), "Bearer pool-secret");
  EXPECT_TRUE(upstream_credentials(load_config_string("")).for_address("h:1").empty());

  for (const std::string& bad : std::vector<std::string>{"", "\n  \n", "two words", "tab\there",
                                                         "caf\xc3\xa9", std::string(4097, 'x')}) {
    const auto path = dir.write("bad.token", bad);
    const auto e = error_of("server:\n  upstreamCredentialFile: " + path + "\n");
    EXPECT_NE(e.find("test.yaml:2: server.upstreamCredentialFile: " + path), std::string::npos)
        << e;
    if (bad.size() > 3) {
      EXPECT_EQ(e.find(bad.substr(0, 4)), std::string::npos) << e;
    }
  }
  EXPECT_EQ(read_credential_file(dir.write("max.token", std::string(4096, 'x'))).size(), 4096u);
  const auto missing =
      error_of("endpoints:\n  - address: h:1\n    credentialFile: " + dir.path("none") + "\n");
  EXPECT_NE(missing.find(dir.path("none") + ": cannot open file"), std::string::npos) << missing;
  // Not in the endpoints file: its entries are read on the data layer's
  // thread, outside any reload.
  const auto eps = dir.write("endpoints.yaml",
                             "endpoints:\n  - address: h:1\n    credentialFile: " + own + "\n");
  EXPECT_NE(endpoints_file_error(eps).find("belongs in the config"), std::string::npos);
}

TEST(UpstreamTls, SettingsLoadAndBadOnesNameTheField) {
  auto c = load_config_string(
      "server:\n  upstreamTls: {caFile: /ca.pem}\nendpoints:\n  - address: h:1\n"
      "  - address: h:2\n    tls: {enabled: false}\n  - address: h:3\n"
      "    tls: {serverName: engine.internal, certificateFile: c.pem, keyFile: k.pem}\n");
  EXPECT_TRUE(c.server.upstream_tls.enabled);
  EXPECT_EQ(c.server.upstream_tls.ca_file, "/ca.pem");
  EXPECT_FALSE(c.server.upstream_tls.insecure_skip_verify);
  EXPECT_FALSE(c.endpoints[0].tls);
  ASSERT_TRUE(c.endpoints[1].tls);
  EXPECT_FALSE(c.endpoints[1].tls->enabled);
  EXPECT_EQ(c.endpoints[2].tls->server_name, "engine.internal");
  EXPECT_FALSE(load_config_string("").server.upstream_tls.enabled);
  EXPECT_EQ(error_of("server:\n  upstreamTls: {certificateFile: c.pem}\n"),
            "test.yaml:2: server.upstreamTls.keyFile: is required with certificateFile");
  EXPECT_NE(error_of("server:\n  upstreamTls: {verify: false}\n").find("upstreamTls.verify"),
            std::string::npos);
  EXPECT_NE(error_of("endpoints:\n  - dns: h:1\n    tls: {}\n").find("endpoints[0].tls"),
            std::string::npos);
}

// At most kMaxFileBytes is read: a bigger file, or one that never ends, is
// an error naming it, never a read without bound.
TEST(ConfigFile, SizeIsBounded) {
  TempDir dir;
  // A comment of exactly the limit loads (as an empty config); one byte more does not.
  const std::string at_limit = "#" + std::string(kMaxFileBytes - 2, 'x') + "\n";
  ASSERT_EQ(at_limit.size(), kMaxFileBytes);
  auto path = dir.write("limit.yaml", at_limit);
  EXPECT_EQ(config_file_error(path), "");
  EXPECT_EQ(endpoints_file_error(path), "");
  path = dir.write("over.yaml", at_limit + "\n");
  EXPECT_EQ(config_file_error(path), path + ": larger than 4 MiB");
  EXPECT_EQ(endpoints_file_error(path), path + ": larger than 4 MiB");

  EXPECT_EQ(config_file_error("/dev/zero"), "/dev/zero: larger than 4 MiB");
  // The endpoints file is read again at every change on the data layer's
  // thread: only a regular file will do.
  EXPECT_EQ(endpoints_file_error("/dev/zero"),
            "/dev/zero: not a regular file (a pipe or a device cannot be watched)");
  EXPECT_EQ(config_file_error(dir.path("")), dir.path("") + ": is a directory");
  EXPECT_EQ(config_file_error(dir.path("missing.yaml")),
            dir.path("missing.yaml") + ": cannot open file (No such file or directory)");
}

// A FIFO as the config file (as --config <(...) gives): read to its end,
// bounded in size and in time.
TEST(ConfigFile, FifoIsBoundedInSizeAndTime) {
  TempDir dir;
  const auto fifo = dir.path("config.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto write_all = [&](const std::string& text) {
    // Opening for writing waits for the reader; SIGPIPE stays with this
    // thread (blocked) once the reader gives up.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  };

  {  // written whole, then closed: loads
    std::thread writer(write_all, "server:\n  threads: 3\n");
    Config c;
    EXPECT_NO_THROW(c = load_config_file(fifo));
    EXPECT_EQ(c.server.threads, 3);
    writer.join();
  }
  {  // more than the limit: refused after limit + 1 bytes (the writer then gets EPIPE)
    std::thread writer(write_all, std::string(kMaxFileBytes + (1 << 20), '#'));
    EXPECT_EQ(config_file_error(fifo), fifo + ": larger than 4 MiB");
    writer.join();
  }
  {  // a writer that neither writes nor closes: an error after 5 s, not a hang
    const int held = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(held, 0);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(config_file_error(fifo), fifo + ": no end of file within 5 s");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    ::close(held);
  }
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

// The data layer has 4096 endpoint slots: a config with more is an error at
// load, not endpoints silently left out of the data plane.
TEST(Config, TooManyEndpointsIsAnError) {
  std::string text = "endpoints:\n";
  for (std::size_t i = 0; i <= kMaxEndpoints; ++i)
    text += "  - address: 10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
            ":8000\n";
  EXPECT_EQ(error_of(text), "test.yaml:2: endpoints: at most 4096 endpoints (4097 given)");
  EXPECT_EQ(error_of("server:\n  maxModelBytes: 0\n"),
            "test.yaml:2: server.maxModelBytes: must be between 1 and 4096");
  EXPECT_EQ(error_of("server:\n  maxConnections: 0\n"),
            "test.yaml:2: server.maxConnections: must be between 1 and 10000000");
}

}  // namespace
}  // namespace sluice::config

// ---------------------------------------------------------------- usage limits

namespace sluice::config {
namespace {

std::string with_policy(const std::string& plugin, const std::string& ref = "ul") {
  return "featureGates: [flowControl]\nplugins:\n" + plugin +
         "flowControl:\n  usageLimitPolicyPluginRef: " + ref + "\n";
}

TEST(ConfigUsageLimit, LlmdPoliciesLoad) {
  // As llm-d's documentation and benchmark recipes write them.
  auto c =
      load_config_string(with_policy("  - type: static-usage-limit-policy\n    name: ul\n    "
                                     "parameters:\n      threshold: 0.8\n"));
  EXPECT_EQ(c.flow_control.usage_limit.type, "static-usage-limit-policy");
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.threshold, 0.8);

  c = load_config_string(with_policy(
      "  - type: priority-holdback-policy\n    name: priority-holdback-050\n    parameters:\n"
      "      domain: rank\n      shape: linear\n      minCeiling: 0.5\n      maxCeiling: 1\n",
      "priority-holdback-050"));
  EXPECT_EQ(c.flow_control.usage_limit.type, "priority-holdback-policy");
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.min_ceiling, 0.5);
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.max_ceiling, 1.0);
  EXPECT_FALSE(c.flow_control.usage_limit.value_domain);

  c = load_config_string(
      with_policy("  - type: priority-holdback-policy\n    name: ul\n    parameters:\n"
                  "      domain: explicit\n      ceilings: {0: 0.8, 100: 1.0, -10: 0.5}\n"));
  EXPECT_TRUE(c.flow_control.usage_limit.explicit_domain);
  std::vector<std::pair<int, double>> want{{100, 1.0}, {0, 0.8}, {-10, 0.5}};
  EXPECT_EQ(c.flow_control.usage_limit.ceilings, want);

  c = load_config_string(
      with_policy("  - type: soft-reflective-ceiling-policy\n", "soft-reflective-ceiling-policy"));
  EXPECT_EQ(c.flow_control.usage_limit.type, "soft-reflective-ceiling-policy");

  // llm-d registers the static policy by itself.
  c = load_config_string(
      "featureGates: [flowControl]\nflowControl:\n  usageLimitPolicyPluginRef: "
      "static-usage-limit-policy\n");
  EXPECT_EQ(c.flow_control.usage_limit.type, "static-usage-limit-policy");
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.threshold, 1.0);

  // Without a ref: no policy (the detector alone decides).
  EXPECT_EQ(load_config_string("featureGates: [flowControl]\n").flow_control.usage_limit.type, "");
}

TEST(ConfigUsageLimit, BadParametersNameFileLineAndField) {
  const std::string p = "  - type: priority-holdback-policy\n    name: ul\n    parameters:\n";
  EXPECT_EQ(error_of(with_policy(
                "  - type: static-usage-limit-policy\n    name: ul\n    parameters:\n      "
                "threshold: 0\n")),
            "test.yaml:6: plugins[ul].parameters.threshold: must be in (0, 1]");
  EXPECT_EQ(error_of(with_policy(
                "  - type: static-usage-limit-policy\n    name: ul\n    parameters:\n      "
                "threshold: 1.5\n")),
            "test.yaml:6: plugins[ul].parameters.threshold: must be in (0, 1]");
  EXPECT_EQ(error_of(with_policy(p + "      maxCeiling: 0.9\n")),
            "test.yaml:6: plugins[ul].parameters.minCeiling: is required");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: 0.6\n      maxCeiling: 0.6\n")),
            "test.yaml:7: plugins[ul].parameters.maxCeiling: minCeiling must be strictly less "
            "than maxCeiling");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: -0.1\n")),
            "test.yaml:6: plugins[ul].parameters.minCeiling: must be in [0, 1)");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: nan\n")),
            "test.yaml:6: plugins[ul].parameters.minCeiling: expected a finite number, got 'nan'");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: 0.5\n      shape: sigmoid\n")),
            "test.yaml:7: plugins[ul].parameters.shape: must be linear (the only shape llm-d has)");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: 0.5\n      domain: log\n")),
            "test.yaml:7: plugins[ul].parameters.domain: must be rank, value or explicit");
  EXPECT_EQ(error_of(with_policy(p + "      minCeiling: 0.5\n      ceilings: {0: 1}\n")),
            "test.yaml:7: plugins[ul].parameters.ceilings: must not be set unless domain is "
            "explicit");
  // Explicit ceilings: non-monotonic, out of [0, 1], mixed with min/max.
  EXPECT_EQ(error_of(with_policy(p + "      domain: explicit\n      ceilings:\n        100: 0.7\n"
                                     "        0: 0.9\n")),
            "test.yaml:9: plugins[ul].parameters.ceilings.0: ceilings must not increase towards "
            "lower priorities: band 0 has 0.9, above band 100's 0.7");
  EXPECT_EQ(
      error_of(with_policy(p + "      domain: explicit\n      ceilings:\n        100: 1.2\n")),
      "test.yaml:8: plugins[ul].parameters.ceilings.100: must be in [0, 1]");
  EXPECT_EQ(error_of(with_policy(p + "      domain: explicit\n      minCeiling: 0.1\n"
                                     "      ceilings: {0: 1}\n")),
            "test.yaml:7: plugins[ul].parameters.minCeiling: must not be set when domain is "
            "explicit");
  EXPECT_EQ(error_of(with_policy(p + "      domain: explicit\n")),
            "test.yaml:6: plugins[ul].parameters.ceilings: is required when domain is explicit: a "
            "mapping of band priority to ceiling");
  EXPECT_EQ(error_of(with_policy(p + "      domain: explicit\n      ceilings: {x: 1}\n")),
            "test.yaml:7: plugins[ul].parameters.ceilings.x: expected an integer, got 'x'");
  EXPECT_EQ(error_of(with_policy(
                "  - type: soft-reflective-ceiling-policy\n    name: ul\n    parameters:\n      "
                "gain: 2\n")),
            "test.yaml:6: plugins[ul].parameters: soft-reflective-ceiling-policy takes none");
  // A declared but unused policy is checked too.
  EXPECT_EQ(error_of("plugins:\n  - type: static-usage-limit-policy\n    parameters:\n      "
                     "threshold: 2\n"),
            "test.yaml:4: plugins[static-usage-limit-policy].parameters.threshold: must be in "
            "(0, 1]");
  // The ref: unknown, or another kind of plugin.
  EXPECT_EQ(error_of("flowControl:\n  usageLimitPolicyPluginRef: nope\n"),
            "test.yaml:2: flowControl.usageLimitPolicyPluginRef: unknown usage limit policy "
            "'nope' (declare it under plugins:, type static-usage-limit-policy, "
            "priority-holdback-policy or soft-reflective-ceiling-policy)");
  EXPECT_EQ(error_of(with_policy("  - type: queue-scorer\n    name: ul\n")),
            "test.yaml:6: flowControl.usageLimitPolicyPluginRef: plugin 'ul' is a queue-scorer, "
            "not a usage limit policy");
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

// The examples of llm-d's policy READMEs
// (pkg/epp/framework/plugins/flowcontrol/usagelimits/), verbatim.
TEST(ConfigUsageLimit, LlmdReadmeExamplesLoadUnchanged) {
  auto c = load_config_string(R"(plugins:
  - type: static-usage-limit-policy
    name: my-usage-limit
    parameters:
      threshold: 0.8
flowControl:
  usageLimitPolicyPluginRef: my-usage-limit
)");
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.threshold, 0.8);
  c = load_config_string(R"(plugins:
  - type: priority-holdback-policy
    name: my-holdback-policy
    parameters:
      shape: linear
      domain: rank
      minCeiling: 0.4
      maxCeiling: 0.9
flowControl:
  usageLimitPolicyPluginRef: my-holdback-policy
)");
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.min_ceiling, 0.4);
  EXPECT_DOUBLE_EQ(c.flow_control.usage_limit.max_ceiling, 0.9);
  c = load_config_string(R"(plugins:
  - type: priority-holdback-policy
    name: my-explicit-holdback
    parameters:
      domain: explicit
      ceilings:
        100: 0.95
        50: 0.70
        10: 0.30
flowControl:
  usageLimitPolicyPluginRef: my-explicit-holdback
)");
  std::vector<std::pair<int, double>> want{{100, 0.95}, {50, 0.70}, {10, 0.30}};
  EXPECT_EQ(c.flow_control.usage_limit.ceilings, want);
  c = load_config_file(std::string(SLUICE_TEST_FIXTURES_DIR) +
                       "/llmd-soft-reflective-ceiling.yaml");
  EXPECT_TRUE(c.flow_control.enabled);
  EXPECT_EQ(c.flow_control.usage_limit.type, "soft-reflective-ceiling-policy");
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigHeadroom, ParsesAndChecks) {
  auto c = load_config_string(R"(featureGates: [flowControl]
flowControl:
  headroom:
    protectedPriority: 100
    reserve: 2
    reserveTokens: 8k
    lend: true
    lendAfterIdle: 500ms
    overAdmission: 1
    reserveEndpoints: 1
)");
  const auto& h = c.flow_control.headroom;
  EXPECT_EQ(h.reserve_endpoints, 1u);
  EXPECT_TRUE(h.enabled);
  EXPECT_EQ(h.protected_priority, 100);
  EXPECT_EQ(h.reserve, 2u);
  EXPECT_EQ(h.reserve_tokens, 8000u);
  EXPECT_EQ(h.lend_after_idle, std::chrono::milliseconds(500));
  EXPECT_EQ(h.over_admission, 1u);
  EXPECT_FALSE(h.pool_scope);
  EXPECT_FALSE(load_config_string("").flow_control.headroom.enabled);

  const std::string head = "flowControl:\n  headroom:\n";
  EXPECT_EQ(error_of(head + "    reserve: 2\n"),
            "test.yaml:3: flowControl.headroom.protectedPriority: is required");
  EXPECT_EQ(error_of(head + "    protectedPriority: 10\n"),
            "test.yaml:3: flowControl.headroom: reserves nothing: set reserve, reserveTokens, "
            "reserveEndpoints or overAdmission");
  EXPECT_EQ(
      error_of(head + "    protectedPriority: 10\n    reserve: -1\n"),
      "test.yaml:4: flowControl.headroom.reserve: expected a size like 5000 or 8Mi, got '-1'");
  EXPECT_EQ(error_of(head + "    protectedPriority: 10\n    reserve: 1\n    scope: rack\n"),
            "test.yaml:5: flowControl.headroom.scope: must be endpoint or pool");
  EXPECT_EQ(error_of(head + "    protectedPriority: 10\n    reserve: 1\n    lendAfterIdle: -1s\n"),
            "test.yaml:5: flowControl.headroom.lendAfterIdle: expected a duration like 500ms or "
            "30s, got '-1s'");
  EXPECT_EQ(
      error_of(head + "    protectedPriority: 10\n    reserveEndpoints: 1\n    scope: pool\n"),
      "test.yaml:4: flowControl.headroom.reserveEndpoints: is per endpoint only (scope: pool "
      "reserves requests anywhere in the pool)");
  EXPECT_EQ(error_of(head + "    protectedPriority: 10\n    reserveEndpoints: -2\n"),
            "test.yaml:4: flowControl.headroom.reserveEndpoints: expected a size like 5000 or 8Mi, "
            "got '-2'");
  EXPECT_EQ(error_of(head + "    protectedPriority: 10\n    reserveTokens: 5\n    scope: pool\n"),
            "test.yaml:4: flowControl.headroom.reserveTokens: is per endpoint only (scope: pool "
            "reserves requests)");
  EXPECT_EQ(
      error_of("plugins:\n  - type: concurrency-detector\n    parameters: {maxConcurrency: 4}\n"
               "saturationDetector: {pluginRef: concurrency-detector}\n" +
               head + "    protectedPriority: 10\n    reserve: 4\n"),
      "test.yaml:7: flowControl.headroom.reserve: leaves lower bands no room: it must be "
      "below the detector's maxConcurrency (4)");
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(Config, DefaultNegativePriorityBand) {
  auto c = load_config_string(R"(plugins:
  - type: round-robin-fairness-policy
flowControl:
  defaultPriorityBand: {maxRequests: 50}
  defaultNegativePriorityBand:
    fairnessPolicyRef: round-robin-fairness-policy
    maxBytes: 1Mi
)");
  ASSERT_TRUE(c.flow_control.default_negative_band.has_value());
  EXPECT_EQ(c.flow_control.default_negative_band->fairness_type, "round-robin-fairness-policy");
  EXPECT_EQ(c.flow_control.default_negative_band->max_bytes, 1u << 20);
  EXPECT_EQ(c.flow_control.default_negative_band->max_requests, 50u);  // from defaultPriorityBand
  EXPECT_FALSE(load_config_string("").flow_control.default_negative_band.has_value());
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigEviction, LlmdSwitchAndSluiceSection) {
  EXPECT_TRUE(
      load_config_string("flowControl:\n  enableEviction: true\n").flow_control.eviction.enabled);
  EXPECT_FALSE(load_config_string("").flow_control.eviction.enabled);
  auto c = load_config_string(R"(flowControl:
  enableEviction: true
  eviction:
    priorities: [-10, -5]
    waitBudget: 200ms
    grace: 50ms
    confirmationTimeout: 5s
)");
  const auto& e = c.flow_control.eviction;
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.priorities, (std::vector<int>{-10, -5}));
  EXPECT_EQ(e.wait_budget, std::chrono::milliseconds(200));
  EXPECT_EQ(e.grace, std::chrono::milliseconds(50));
  EXPECT_EQ(e.confirmation_timeout, std::chrono::seconds(5));

  EXPECT_EQ(error_of("flowControl:\n  eviction:\n    priorities: [-10, 0]\n"),
            "test.yaml:3: flowControl.eviction.priorities[1]: band 0 is not sheddable: only bands "
            "below priority 0 can be evicted");
  EXPECT_EQ(error_of("flowControl:\n  eviction:\n    waitBudget: -1s\n"),
            "test.yaml:3: flowControl.eviction.waitBudget: expected a duration like 500ms or "
            "30s, got '-1s'");
  EXPECT_EQ(error_of("flowControl:\n  eviction:\n    confirmationTimeout: 0s\n"),
            "test.yaml:3: flowControl.eviction.confirmationTimeout: must be greater than zero");
  EXPECT_EQ(error_of("flowControl:\n  enableEviction: false\n  eviction:\n    grace: 1s\n"),
            "test.yaml:4: flowControl.eviction: is set while enableEviction is false");
  EXPECT_EQ(error_of("flowControl:\n  enableEviction: yes please\n"),
            "test.yaml:2: flowControl.enableEviction: expected true or false, got 'yes please'");
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

// bench/priority_flood/base.yaml with each of bench/priority_flood.sh's
// additions loads (the benchmark must not fail on a config error).
TEST(Config, PriorityFloodBenchConfigsLoad) {
  const std::string base = std::string(SLUICE_CONFIG_DIR) + "/../bench/priority_flood/base.yaml";
  std::ifstream in(base);
  ASSERT_TRUE(in) << base;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* extra :
       {"", "  usageLimitPolicyPluginRef: holdback\n",
        "  usageLimitPolicyPluginRef: soft-reflective-ceiling-policy\n",
        "  headroom: {protectedPriority: 100, reserve: 1, lendAfterIdle: 5s}\n",
        "  headroom: {protectedPriority: 100, overAdmission: 1}\n", "  enableEviction: true\n",
        "  headroom: {protectedPriority: 100, reserve: 1, lendAfterIdle: 5s, overAdmission: 1}\n"
        "  enableEviction: true\n"}) {
    EXPECT_NO_THROW(load_config_string(text + extra, base)) << extra;
  }
}

// The fleet's store (issue 13): every field, its defaults, and each bad
// value a config error naming file, line and field.
TEST(ConfigRedis, SectionLoadsWithDefaultsAndEveryField) {
  EXPECT_FALSE(load_config_string("").redis.enabled);
  const Config d = load_config_string("redis:\n  address: 127.0.0.1:6380\n");
  EXPECT_TRUE(d.redis.enabled);
  EXPECT_EQ(d.redis.host, "127.0.0.1");
  EXPECT_EQ(d.redis.port, 6380);
  EXPECT_EQ(d.redis.key_prefix, "sluice");
  EXPECT_EQ(d.redis.sync_interval, 25ms);
  EXPECT_EQ(d.redis.lease, 2s);
  EXPECT_EQ(d.redis.timeout, 200ms);
  EXPECT_EQ(d.redis.max_hold, 100ms);
  char tmpl[] = "/tmp/sluice-redis-pw-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "s3cret\n", 7), 7);
  close(fd);
  const Config c = load_config_string(std::string("redis:\n  unixSocket: /run/redis.sock\n"
                                                  "  user: sluice\n  passwordFile: ") +
                                      tmpl +
                                      "\n  keyPrefix: prod:{gw}\n  replicaId: pod-1\n"
                                      "  syncInterval: 10ms\n  timeout: 50ms\n  lease: 1s\n"
                                      "  fairnessSlack: 512\n  maxHold: 40ms\n"
                                      "  maxReplicas: 8\n");
  std::remove(tmpl);
  EXPECT_EQ(c.redis.unix_socket, "/run/redis.sock");
  EXPECT_EQ(c.redis.user, "sluice");
  EXPECT_EQ(c.redis.password, "s3cret") << "the trailing newline is not part of it";
  EXPECT_EQ(c.redis.key_prefix, "prod:{gw}");
  EXPECT_EQ(c.redis.replica_id, "pod-1");
  EXPECT_EQ(c.redis.sync_interval, 10ms);
  EXPECT_EQ(c.redis.timeout, 50ms);
  EXPECT_EQ(c.redis.lease, 1s);
  EXPECT_DOUBLE_EQ(c.redis.fairness_slack, 512);
  EXPECT_EQ(c.redis.max_hold, 40ms);
  EXPECT_EQ(c.redis.max_replicas, 8u);
}

TEST(ConfigRedis, BadValuesNameFileLineAndField) {
  EXPECT_EQ(error_of("redis:\n  address: 127.0.0.1:6379\n  unixSocket: /x.sock\n"),
            "test.yaml:3: redis.unixSocket: set either address or unixSocket, not both");
  EXPECT_EQ(error_of("redis:\n  address: nowhere\n"),
            "test.yaml:2: redis.address: expected HOST:PORT, got 'nowhere'");
  EXPECT_EQ(error_of("redis:\n  syncInterval: 100ms\n  lease: 150ms\n"),
            "test.yaml:3: redis.lease: must be at least twice redis.syncInterval");
  EXPECT_EQ(error_of("redis:\n  syncInterval: 0s\n"),
            "test.yaml:2: redis.syncInterval: must be between 1ms and 10s");
  EXPECT_EQ(error_of("redis:\n  fairnessSlack: -1\n"),
            "test.yaml:2: redis.fairnessSlack: must be between 0 and 1e12");
  EXPECT_EQ(error_of("redis:\n  maxReplicas: 0\n"),
            "test.yaml:2: redis.maxReplicas: must be between 1 and 1024");
  EXPECT_EQ(error_of("redis:\n  keyPrefix: 'a b'\n"),
            "test.yaml:2: redis.keyPrefix: may hold letters, digits and -_:.{} only");
  EXPECT_EQ(error_of("redis:\n  user: sluice\n"),
            "test.yaml:2: redis.user: needs redis.passwordFile");
  EXPECT_NE(error_of("redis:\n  passwordFile: /nonexistent/pw\n")
                .find("test.yaml:2: redis.passwordFile: /nonexistent/pw: cannot open file"),
            std::string::npos);
  EXPECT_EQ(error_of("redis:\n  password: inline\n"), "test.yaml:2: redis.password: unknown field");
}

TEST(ConfigTls, SectionLoadsWithDefaultsAndEveryField) {
  auto c = load_config_string(R"(
server:
  tls:
    listen: 127.0.0.1:8443
    certificateFile: chain.pem
    keyFile: key.pem
)");
  const auto& t = c.server.tls;
  EXPECT_TRUE(t.enabled());
  EXPECT_EQ(c.server.listen, "127.0.0.1:8080");  // the plain listener stays
  EXPECT_EQ(t.listen, "127.0.0.1:8443");
  EXPECT_EQ(t.certificate_file, "chain.pem");
  EXPECT_EQ(t.key_file, "key.pem");
  EXPECT_EQ(t.min_version, "1.2");
  EXPECT_EQ(t.ciphers, "");
  EXPECT_EQ(t.cipher_suites, "");
  EXPECT_EQ(t.client_ca_file, "");
  EXPECT_FALSE(t.require_client_certificate);
  EXPECT_EQ(t.reload_check_interval, std::chrono::nanoseconds(5s));
  EXPECT_FALSE(load_config_string("").server.tls.enabled());

  c = load_config_string(R"(
server:
  listen: ""
  tls:
    listen: 0.0.0.0:443
    certificateFile: /etc/sluice/chain.pem
    keyFile: /etc/sluice/key.pem
    minVersion: "1.3"
    ciphers: ECDHE+AESGCM
    cipherSuites: TLS_AES_128_GCM_SHA256
    clientCaFile: /etc/sluice/clients.pem
    requireClientCertificate: true
    reloadCheckInterval: 30s
)");
  EXPECT_EQ(c.server.listen, "");
  EXPECT_EQ(c.server.tls.min_version, "1.3");
  EXPECT_EQ(c.server.tls.ciphers, "ECDHE+AESGCM");
  EXPECT_EQ(c.server.tls.cipher_suites, "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(c.server.tls.client_ca_file, "/etc/sluice/clients.pem");
  EXPECT_TRUE(c.server.tls.require_client_certificate);
  EXPECT_EQ(c.server.tls.reload_check_interval, std::chrono::nanoseconds(30s));
  // Unquoted, 1.2 is still the string "1.2".
  EXPECT_EQ(error_of("server:\n  tls:\n    listen: 127.0.0.1:1\n    certificateFile: c\n"
                     "    keyFile: k\n    minVersion: 1.2\n"),
            "");
}

TEST(ConfigTls, BadValuesNameFileLineAndField) {
  const std::string head = "server:\n  tls:\n    listen: 127.0.0.1:8443\n";
  const std::string files = "    certificateFile: c.pem\n    keyFile: k.pem\n";
  EXPECT_EQ(error_of(head + files + "    minVersion: \"1.1\"\n"),
            "test.yaml:6: server.tls.minVersion: must be \"1.2\" or \"1.3\" (TLS 1.0 and 1.1 "
            "are never offered), got '1.1'");
  EXPECT_EQ(error_of(head + files + "    minVersion: \"1.0\"\n").find("test.yaml:6"), 0u);
  EXPECT_EQ(error_of(head + files + "    protocols: all\n"),
            "test.yaml:6: server.tls.protocols: unknown field");
  EXPECT_EQ(error_of(head + "    keyFile: k.pem\n"),
            "test.yaml:3: server.tls.certificateFile: is required");
  EXPECT_EQ(error_of(head + "    certificateFile: c.pem\n"),
            "test.yaml:3: server.tls.keyFile: is required");
  EXPECT_EQ(error_of("server:\n  tls:\n    certificateFile: c.pem\n    keyFile: k.pem\n"),
            "test.yaml:3: server.tls.listen: is required");
  EXPECT_EQ(error_of(head + files + "    requireClientCertificate: true\n"),
            "test.yaml:6: server.tls.requireClientCertificate: needs clientCaFile (the CAs client "
            "certificates are verified against)");
  EXPECT_EQ(error_of(head + files + "    reloadCheckInterval: 0s\n"),
            "test.yaml:6: server.tls.reloadCheckInterval: must be greater than zero");
  EXPECT_EQ(error_of("server:\n  tls:\n    listen: nowhere\n" + files),
            "test.yaml:3: server.tls.listen: expected HOST:PORT, got 'nowhere'");
  EXPECT_EQ(error_of("server:\n  tls: on\n"), "test.yaml:2: server.tls: expected a mapping");
  // No listener at all, or both on one address.
  EXPECT_EQ(error_of("server:\n  listen: \"\"\n"),
            "test.yaml:2: server.listen: must not be empty without server.tls (no listener at "
            "all)");
  EXPECT_EQ(
      error_of("server:\n  listen: 127.0.0.1:8443\n  tls:\n    listen: 127.0.0.1:8443\n" + files),
      "test.yaml:4: server.tls.listen: is server.listen's address; the TLS listener needs "
      "its own");
  EXPECT_EQ(error_of("server:\n  listen: 127.0.0.1:0\n  tls:\n    listen: 127.0.0.1:0\n" + files),
            "");
}

TEST(ConfigDns, EntriesAndOptionsLoadAndBadOnesNameTheField) {
  const Config c = load_config_string(
      "server:\n  dnsRefreshInterval: 2s\n  dnsTimeout: 300ms\n  dnsServers: [10.0.0.10:53]\n"
      "endpoints:\n  - address: 10.0.0.1:8000\n  - dns: vllm.models.svc.cluster.local:8000\n"
      "    engine: sglang\n    labels: {role: decode}\n");
  ASSERT_EQ(c.endpoints.size(), 1u);
  ASSERT_EQ(c.dns_endpoints.size(), 1u);
  EXPECT_EQ(c.dns_endpoints[0].dns, "vllm.models.svc.cluster.local:8000");
  EXPECT_EQ(c.dns_endpoints[0].host, "vllm.models.svc.cluster.local");
  EXPECT_EQ(c.dns_endpoints[0].port, 8000);
  EXPECT_EQ(c.dns_endpoints[0].engine, "sglang");
  EXPECT_EQ(c.dns_endpoints[0].labels.at("role"), "decode");
  EXPECT_EQ(c.server.dns_refresh_interval, 2s);
  EXPECT_EQ(c.server.dns_timeout, 300ms);
  EXPECT_EQ(c.server.dns_servers, std::vector<std::string>{"10.0.0.10:53"});
  EXPECT_EQ(error_of("endpoints:\n  - dns: a.test:80\n    address: 10.0.0.1:80\n"),
            "test.yaml:2: endpoints[0].dns: set either address or dns, not both");
  EXPECT_EQ(error_of("endpoints:\n  - dns: a.test\n"),
            "test.yaml:2: endpoints[0].dns: expected HOST:PORT, got 'a.test'");
  EXPECT_EQ(error_of("endpoints:\n  - dns: a.test:0\n"),
            "test.yaml:2: endpoints[0].dns: port must not be 0");
  EXPECT_EQ(error_of("endpoints:\n  - dns: a.test:80\n  - dns: a.test:80\n"),
            "test.yaml:3: endpoints[1].dns: duplicate dns entry a.test:80");
  EXPECT_EQ(error_of("server:\n  dnsServers: [dns.test:53]\n"),
            "test.yaml:2: server.dnsServers[0]: expected IPv4:PORT, got 'dns.test:53'");
  EXPECT_EQ(error_of("server:\n  dnsRefreshInterval: 0s\n"),
            "test.yaml:2: server.dnsRefreshInterval: must be greater than zero");
}

}  // namespace
}  // namespace sluice::config
