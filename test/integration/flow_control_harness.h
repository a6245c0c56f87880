// Helpers for the flow-control integration tests: a config with the
// concurrency detector (no metrics scraping), flow headers, outcome checks.
#pragma once

#include <nlohmann/json.hpp>
#include <thread>

#include "harness.h"

namespace sluice::test {

inline const std::string kHost = "127.0.0.1";

inline std::string fc_config(const std::string& endpoint, int max_concurrency,
                             const std::string& fairness,
                             const std::string& flow_control_extra = "") {
  return "server:\n  listen: 127.0.0.1:0\n  threads: 2\n"
         "endpoints:\n  - address: " +
         endpoint +
         "\n"
         "featureGates: [flowControl]\n"
         "plugins:\n"
         "  - type: concurrency-detector\n"
         "    parameters: {maxConcurrency: " +
         std::to_string(max_concurrency) +
         "}\n"
         "  - type: " +
         fairness +
         "\n"
         "saturationDetector: {pluginRef: concurrency-detector}\n"
         "objectives:\n"
         "  - {name: interactive, priority: 100}\n"
         "  - {name: best-effort, priority: -10}\n"
         "flowControl:\n"
         "  defaultPriorityBand: {fairnessPolicyRef: " +
         fairness + "}\n" + flow_control_extra;
}

// `config` (from fc_config) with extra `server:` lines.
inline std::string with_server(std::string config, const std::string& lines) {
  const std::string at = "threads: 2\n";
  config.insert(config.find(at) + at.size(), lines);
  return config;
}

inline Headers flow(const std::string& id, const std::string& objective = "") {
  Headers h = {{"x-gateway-inference-fairness-id", id}};
  if (!objective.empty()) h.emplace_back("x-gateway-inference-objective", objective);
  return h;
}

// llm-d's x-llm-d-request-dropped-reason for sluice's reason.
inline std::string llmd_reason(const std::string& reason) {
  if (reason == "rejected-capacity") return "rejected-saturated";
  if (reason == "rejected-no-endpoints") return "rejected-no-endpoints";
  if (reason == "evicted-ttl") return "rejected-ttl-expired";
  if (reason == "evicted-displaced") return "evicted-priority";
  if (reason == "evicted-preempted") return "evicted";
  if (reason == "evicted-other" || reason == "draining") return "rejected-shutting-down";
  return "";
}

inline void expect_outcome(const Response& r, int status, const std::string& reason,
                           bool retry_after) {
  EXPECT_EQ(r.status, status) << r.error << r.body;
  EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), reason);
  EXPECT_EQ(r.header("x-llm-d-request-dropped-reason"), llmd_reason(reason));
  EXPECT_EQ(!r.header("retry-after").empty(), retry_after);
  auto body = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r.body;
  EXPECT_EQ(body["error"]["code"], reason);
}

// True once the queue a request with `headers` would join is full: a probe
// with a 1 ms TTL is then rejected at once (429) instead of being queued and
// expiring (503). Never blocks for long.
inline bool queue_full(std::uint16_t port, Headers headers) {
  headers.emplace_back("x-gateway-inference-ttl-ms", "1");
  HttpClient probe(kHost, port);
  return probe.post_json("/v1/completions", completion_body(1), headers).status == 429;
}

// Sends until the request is not turned away for capacity: a probe of
// queue_full() may hold the only slot for a moment. Once a probe finds the
// queue full, the slot is held by this request (probes run one at a time).
inline Response post_until_queued(std::uint16_t port, const Headers& headers) {
  HttpClient c(kHost, port, 30000ms);
  Response r;
  for (int attempt = 0; attempt < 500; ++attempt) {
    r = c.post_json("/v1/completions", completion_body(2), headers);
    if (!(r.status == 429 && r.header("x-gateway-inference-dropped-reason") == "rejected-capacity"))
      break;
  }
  return r;
}

// Occupies the pool's only slot with a long request (`tokens` of the mock's
// decode time: 1.5 s at 10 ms each by default). Returns when the request is
// in flight at the mock.
class Occupier {
 public:
  Occupier(std::uint16_t sluice_port, Process& mock, int tokens = 150) {
    thread_ = std::thread([this, sluice_port, tokens] {
      HttpClient c(kHost, sluice_port, 30000ms);
      result_ = c.post_json("/v1/completions", completion_body(tokens), flow("occupier"));
    });
    const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
    EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock.port(), running) == 1; }));
  }
  ~Occupier() { finish(); }
  // Waits for the occupying request and returns its response.
  const Response& finish() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  std::thread thread_;
  Response result_;
};

}  // namespace sluice::test
