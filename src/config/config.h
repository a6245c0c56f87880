// The typed configuration of sluice: a GIE EndpointPickerConfig plus the
// optional sluice sections `server`, `endpoints`, `objectives` and `flows`
// (DESIGN.md §3.3, §3.6). Every default is visible here.
//
// Loading throws ConfigError (config is read at startup or on reload, never on
// the data plane); the message names the file, line and field path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::config {

using std::chrono::nanoseconds;
using namespace std::chrono_literals;

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";
  std::string admin_listen = "127.0.0.1:9090";
  int threads = 0;  // 0: one I/O thread per core
  std::uint64_t max_body_bytes = 8ull << 20;
  std::uint32_t max_header_bytes = 16u << 10;
  nanoseconds header_read_timeout = 10s;      // first byte to end of headers
  nanoseconds body_read_timeout = 30s;        // end of headers to end of body
  nanoseconds keep_alive_idle_timeout = 60s;  // between requests on a connection
  nanoseconds client_write_timeout = 30s;     // each write to a (slow) client
  nanoseconds upstream_connect_timeout = 2s;
  // Upstream silence allowed before the response headers and between body
  // chunks. An LLM may think for a while before the first token.
  nanoseconds upstream_idle_timeout = 120s;
  // Idle keep-alive connections kept per endpoint per I/O thread; more are closed.
  std::uint32_t upstream_max_idle_per_endpoint = 128;
  // An endpoint that refused or timed out a connection is skipped this long.
  nanoseconds endpoint_down_backoff = 1s;
  // On SIGTERM: how long in-flight requests may take before connections close.
  nanoseconds shutdown_grace_period = 30s;
};

struct EndpointConfig {
  std::string address;  // host:port
  std::string host;
  std::uint16_t port = 0;
  std::string engine = "vllm";  // vllm | sglang | trtllm-serve
  std::map<std::string, std::string> labels;
};

struct ObjectiveConfig {
  std::string name;
  int priority = 0;
  std::optional<nanoseconds> ttl;
};

struct FlowConfig {
  std::string id;
  double weight = 1.0;
};

// A plugin instance of the GIE `plugins:` list. Parameters are interpreted by
// the plugin's factory (scheduling layer), which reports its own errors.
struct PluginSpec {
  std::string type;
  std::string name;  // defaults to type
  YAML::Node parameters;
  int line = 0;
};

struct ProfilePluginRef {
  std::string plugin_ref;
  std::optional<double> weight;
  int line = 0;
};

struct SchedulingProfileSpec {
  std::string name;
  std::vector<ProfilePluginRef> plugins;
};

struct Config {
  std::string source;  // file name, for messages
  std::string api_version;
  std::string kind;

  ServerOptions server;
  std::vector<EndpointConfig> endpoints;
  std::vector<ObjectiveConfig> objectives;
  std::vector<FlowConfig> flows;

  // GIE EndpointPickerConfig sections.
  std::vector<PluginSpec> plugins;
  std::vector<SchedulingProfileSpec> scheduling_profiles;
  std::vector<std::string> feature_gates;
  // Sections that later layers interpret (flow control, saturation detector,
  // parser, data layer); kept as parsed YAML with their line marks.
  YAML::Node flow_control;
  YAML::Node saturation_detector;
  YAML::Node parser;
  YAML::Node data;
};

Config load_config_file(const std::string& path);
Config load_config_string(const std::string& text, const std::string& source = "<config>");

}  // namespace sluice::config
