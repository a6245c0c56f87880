// A sluice-load scenario (YAML): flows with their arrival process, request
// shape and phases; a duration and a request cap so every run is bounded.
// Errors name the field path and line: "flows[1].arrival.rate (line 12): ...".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tools/load/distributions.h"

namespace sluice::load {

using Duration = std::chrono::nanoseconds;

class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Arrival {
  enum class Kind { kPoisson, kConstant, kClosed };
  Kind kind = Kind::kPoisson;
  double rate = 1;    // requests per second (open loop)
  int clients = 1;    // closed loop: concurrent clients, each sends after its answer
  Duration think{0};  // closed loop: pause between an answer and the next request
};

// From `at` on (since the start of the run), the flow's rate or clients
// change; `stop` ends its arrivals (until a later phase).
struct Phase {
  Duration at{0};
  std::optional<double> rate;
  std::optional<int> clients;
  bool stop = false;
};

struct FlowSpec {
  std::string name;
  std::string fairness_id;  // x-gateway-inference-fairness-id ("" none)
  std::string objective;    // x-gateway-inference-objective ("" none)
  std::vector<std::pair<std::string, std::string>> headers;  // raw extra headers
  double weight = 1;  // its expected share, for the weighted Jain index
  std::string group;  // Jain's index is computed within a group (default: the objective)
  Arrival arrival;
  Distribution prompt_tokens{Distribution::Kind::kConstant, 64};
  Distribution max_tokens{Distribution::Kind::kConstant, 32};
  double shared_prefix_share = 0;  // of its requests, this share starts with a shared prefix
  bool stream = false;
  Duration start{0};
  std::optional<Duration> stop;  // none: until the end
  std::vector<Phase> phases;
};

struct Scenario {
  std::string name = "scenario";
  std::string description;
  std::string target;                    // http://host:port ("" : from the command line)
  std::string path = "/v1/completions";  // or /v1/chat/completions
  std::string model = "mock-model";
  Duration duration = std::chrono::seconds(10);
  std::uint64_t max_requests = 10000;           // the whole run
  Duration timeout = std::chrono::seconds(60);  // one request
  Duration drain = std::chrono::seconds(30);    // after the end, for answers still due
  Duration warmup{0};                           // excluded from the statistics
  int shared_prefix_count = 4;
  std::uint64_t shared_prefix_tokens = 256;
  std::uint64_t seed = 1;
  int max_connections = 512;  // per run; arrivals beyond are counted as not sent
  std::vector<FlowSpec> flows;
};

Scenario parse_scenario(const std::string& yaml_text, const std::string& source);
Scenario load_scenario_file(const std::string& path);

}  // namespace sluice::load
