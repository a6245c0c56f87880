// The scheduler end to end: real sluice in front of real sluice-mock
// endpoints. Prefix affinity is measured, not assumed: the same workload
// runs under the default profile and under least-in-flight routing, and the
// cache hit rate and latency reported by the mocks are compared.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "harness.h"
#include "support/fixture_text.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

struct Outcome {
  double hit_rate = 0;  // cached prompt tokens / prompt tokens
  double mean_latency_ms = 0;
  int ok = 0;
  std::map<std::string, int> served_by;
  std::map<std::string, int> placement;  // "prompt@port": requests
};

// K shared system prompts (~1000 tokens each), a unique question appended;
// C closed-loop clients send N requests in total.
Outcome run_shared_prefix_workload(std::uint16_t port, int n, int clients) {
  constexpr int kPrompts = 6;
  std::vector<std::string> system(kPrompts);
  for (int k = 0; k < kPrompts; ++k) {
    std::string s = "System prompt " + std::to_string(k) + ": ";
    while (s.size() < 4000)
      s += "you are assistant number " + std::to_string(k) + " and you answer briefly. ";
    system[k] = s;
  }
  // Which system prompt each request carries: every round of six carries
  // each prompt once, the round's order rotated by one each time. In plain
  // order (i % 6) a router that merely rotates over the three endpoints
  // (what least-in-flight does when requests go one at a time, as under
  // ThreadSanitizer) would pin each prompt to one endpoint and look like
  // affinity.
  std::vector<int> prompt_of(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    prompt_of[static_cast<std::size_t>(i)] = (i + i / kPrompts) % kPrompts;
  std::atomic<int> next{0};
  std::mutex mu;
  Outcome out;
  std::uint64_t prompt_tokens = 0, cached_tokens = 0;
  double latency_sum = 0;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      HttpClient client(kHost, port, std::chrono::milliseconds(30000));
      for (int i; (i = next++) < n;) {
        const std::string prompt =
            system[static_cast<std::size_t>(prompt_of[static_cast<std::size_t>(i)])] +
            " Question " + std::to_string(i) + "?";
        const auto t0 = Clock::now();
        auto r = client.post_json("/v1/completions", completion_body(2, false, prompt));
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        std::lock_guard lock(mu);
        if (r.status != 200) {
          ADD_FAILURE() << r.status << " " << r.body << r.error;
          continue;
        }
        auto j = nlohmann::json::parse(r.body);
        prompt_tokens += j["usage"]["prompt_tokens"].get<std::uint64_t>();
        cached_tokens += j["usage"]["prompt_tokens_details"]["cached_tokens"].get<std::uint64_t>();
        latency_sum += ms;
        out.ok += 1;
        out.served_by[r.header("x-gateway-destination-endpoint-served")] += 1;
        out.placement[std::to_string(prompt_of[static_cast<std::size_t>(i)]) + "@" +
                      r.header("x-gateway-destination-endpoint-served").substr(10)] += 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  out.hit_rate = prompt_tokens ? static_cast<double>(cached_tokens) / prompt_tokens : 0;
  out.mean_latency_ms = out.ok ? latency_sum / out.ok : 0;
  return out;
}

Outcome measure(const std::string& scheduling_section) {
  // Each mock holds three of the six system prompts in its KV cache, so
  // where a prompt goes decides whether it is cached. Three, not two: with
  // room for exactly two, one endpoint given a third prompt (the default
  // profile balancing load against affinity, by scrape timing) thrashed
  // two caches, and affinity's hit rate ranged 0.56-0.93 between runs
  // under ASan; with three it held 0.89-0.93 in 16 runs, least-in-flight
  // 0.30-0.46.
  std::vector<std::unique_ptr<Process>> mocks;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    mocks.push_back(
        start_mock({"--kv-capacity-tokens", "3700", "--max-running", "2", "--prefill-us-per-token",
                    "100", "--decode-ms-per-token", "2", "--seed", std::to_string(i + 1)}));
    addrs.push_back(mocks.back()->address());
  }
  TempFile cfg(make_config(addrs) + scheduling_section);
  auto sluice = start_sluice(cfg);
  return run_shared_prefix_workload(sluice->port(), 90, 3);
}

TEST(Scheduling, PrefixAffinityBeatsLeastInFlight) {
  const Outcome affinity = measure("");  // no profile: the default one
  const Outcome baseline = measure(R"(plugins:
- type: in-flight-requests-scorer
schedulingProfiles:
- name: least-in-flight
  plugins:
  - pluginRef: in-flight-requests-scorer
)");
  ASSERT_EQ(affinity.ok, 90);
  ASSERT_EQ(baseline.ok, 90);
  std::cout << "prefix-affinity: hit rate " << affinity.hit_rate << ", mean "
            << affinity.mean_latency_ms << " ms; least-in-flight: hit rate " << baseline.hit_rate
            << ", mean " << baseline.mean_latency_ms << " ms; affinity served by";
  for (const auto& [e, n] : affinity.served_by) std::cout << " " << e << ": " << n;
  std::cout << "; placement";
  for (const auto& [e, n] : affinity.placement) std::cout << " " << e << ":" << n;
  std::cout << "\n";
  // Clearly higher: by at least 25 points of the prompt tokens.
  EXPECT_GE(affinity.hit_rate, baseline.hit_rate + 0.25);
  // (Faster too, as prefill of uncached prompts dominates a 2-token answer:
  // printed above, not asserted. A latency ratio on a shared 2-core host
  // measures the host; the hit rate is what the scheduler decides.)
  // Affinity did not pile everything onto one endpoint.
  EXPECT_GE(affinity.served_by.size(), 2u);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// llm-d's published P/D config, unchanged, plus endpoints labelled with
// roles and racks: two prefill endpoints (racks r1, r2) and one decode
// endpoint in rack r2. All idle, so the two prefill endpoints score the
// same and the topology decides: the same-rack prefill every time.
TEST(Scheduling, PrefillDecodePairAndHeader) {
  std::ifstream in(std::string(SLUICE_TEST_FIXTURES_DIR) + "/llmd-pd-epp-config.yaml");
  std::stringstream pd;
  pd << in.rdbuf();
  auto p1 = start_mock(), p2 = start_mock(), d1 = start_mock();
  auto labels = [](const char* role, const char* rack) {
    return std::string("    labels: {llm-d.ai/role: ") + role +
           ", topology.kubernetes.io/zone: z1, block: b1, rack: " + rack + "}\n";
  };
  std::string cfg = pd.str() + "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n" +
                    "  - address: " + p1->address() + "\n" + labels("prefill", "r1") +
                    "  - address: " + p2->address() + "\n" + labels("prefill", "r2") +
                    "  - address: " + d1->address() + "\n" + labels("decode", "r2");
  TempFile config(cfg);
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 12; ++i) {
    // ~500 tokens, each prompt new: nothing cached, so prefill runs.
    std::string prompt = "Request " + std::to_string(i) + ": ";
    while (prompt.size() < 2000)
      prompt += "long context for disaggregated prefill " + std::to_string(i) + " ";
    auto r = client.post_json("/v1/completions", completion_body(2, false, prompt));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"),
              d1->address());                                          // decode is primary
    EXPECT_EQ(r.header("x-mock-prefiller-host-port"), p2->address());  // same rack as d1
  }
  // A short prompt (under nonCachedTokens: 16) decodes without prefill, and
  // a client cannot choose the prefiller itself: its header is dropped.
  auto r = client.post_json("/v1/completions", completion_body(2, false, "hi"),
                            {{"x-prefiller-host-port", "10.9.9.9:1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), d1->address());
  EXPECT_EQ(r.header("x-mock-prefiller-host-port"), "");
}

// Every endpoint is a prefill endpoint: no decode worker can ever take the
// request. It gets a typed 503 with the scheduler's reason; the daemon
// keeps serving.
TEST(Scheduling, NoDecodeWorkerIsATypedRejection) {
  std::ifstream in(std::string(SLUICE_TEST_FIXTURES_DIR) + "/llmd-pd-epp-config.yaml");
  std::stringstream pd;
  pd << in.rdbuf();
  auto p1 = start_mock();
  TempFile config(pd.str() +
                  "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n  - address: " +
                  p1->address() + "\n    labels: {llm-d.ai/role: prefill}\n");
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 2; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(2));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), "rejected-no-endpoints");
    EXPECT_NE(r.body.find("failed to find available decode workers"), std::string::npos) << r.body;
  }
  auto m = client.request("GET", "/v1/models");
  EXPECT_EQ(m.status, 200);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

// Endpoints listed in a watched file join and leave the pool while traffic
// flows; a stream in flight on a removed endpoint finishes; a broken file
// changes nothing.
TEST(Scheduling, EndpointsFileChangesThePoolWithoutDroppingRequests) {
  auto a = start_mock({"--decode-ms-per-token", "20"});
  auto b = start_mock();
  TempFile endpoints("endpoints:\n  - address: " + a->address() + "\n", "endpoints.yaml");
  TempFile config("server:\n  listen: 127.0.0.1:0\n  threads: 1\n  endpointsFile: " +
                  endpoints.path() + "\n  endpointsFilePollInterval: 50ms\n");
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 3; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), a->address());
  }
  // A 40-token stream (~0.8 s) on A while A leaves the pool.
  StreamResult stream;
  std::thread streamer([&] {
    HttpClient c(kHost, sluice->port());
    stream = c.stream("/v1/completions", completion_body(40, true));
  });
  ASSERT_TRUE(eventually(
      [&] { return scrape_metric(kHost, a->port(), "vllm:num_requests_running") >= 1; }));
  write_file_atomically(endpoints.path(), "endpoints:\n  - address: " + b->address() + "\n");
  EXPECT_TRUE(eventually([&] {
    auto r = client.post_json("/v1/completions", completion_body(1));
    return r.status == 200 && r.header("x-gateway-destination-endpoint-served") == b->address();
  }));
  streamer.join();
  EXPECT_TRUE(stream.complete) << stream.error;
  EXPECT_EQ(stream.head.status, 200);
  EXPECT_EQ(stream.head.header("x-gateway-destination-endpoint-served"), a->address());
  EXPECT_GE(stream.events.size(), 40u);
  // From now on only B serves.
  for (int i = 0; i < 5; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), b->address());
  }
  // A broken file keeps the current pool.
  write_file_atomically(endpoints.path(), "endpoints:\n  - adress: nope\n");
  const double a_before = scrape_metric(kHost, a->port(), "mock_requests_total");
  for (int i = 0; i < 5; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), b->address());
  }
  EXPECT_EQ(scrape_metric(kHost, a->port(), "mock_requests_total"), a_before);
  EXPECT_EQ(sluice->stop(), 0);
}

// An endpoint whose /metrics never answers: each scrape times out, its
// metrics stay missing, so it counts as saturated and gets no request;
// the other endpoint serves everything and nothing crashes.
TEST(Scheduling, ScrapeTimeoutMarksTheEndpointStale) {
  int hole = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(hole, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(hole, 64), 0);  // accepts into the backlog, never answers
  socklen_t len = sizeof addr;
  ::getsockname(hole, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string hole_address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto good = start_mock();
  TempFile config(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  metricsTimeout: 100ms\n"
      "featureGates: [flowControl]\nendpoints:\n  - address: " +
      hole_address + "\n  - address: " + good->address() + "\n");
  auto sluice = start_sluice(config);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 10; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), good->address());
  }
  EXPECT_EQ(sluice->stop(), 0);
  ::close(hole);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// llm-d's optimized-baseline guide (issue 40, load): token-load-scorer
// behind prefix-cache-affinity-filter, fed by the inflight-load-producer
// and the approximate prefix producer, serving chat completions and a
// stream to the mocks; a repeated system prompt stays on the endpoint
// that has it cached.
TEST(Scheduling, OptimizedBaselineGuideServesChatAndStreamsStickingToTheWarmEndpoint) {
  std::vector<std::unique_ptr<Process>> mocks;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    mocks.push_back(start_mock({"--seed", std::to_string(i + 1)}));
    addrs.push_back(mocks.back()->address());
  }
  TempFile cfg(make_config(addrs) + test_support::llmd_fixture("optimized-baseline-guide.yaml"));

  auto sluice = start_sluice(cfg);
  std::string system = "You are a careful assistant. ";
  while (system.size() < 4000) system += "Answer in one short sentence, politely. ";
  auto chat = [&](int i, bool stream) {
    return R"({"model":"mock-model","max_tokens":3,)" +
           std::string(stream ? R"("stream":true,)" : "") + R"("messages":[{"role":"system",)" +
           R"("content":")" + system + R"("},{"role":"user","content":"Question )" +
           std::to_string(i) + R"(?"}]})";
  };
  HttpClient client(kHost, sluice->port(), std::chrono::milliseconds(30000));
  auto first = client.post_json("/v1/chat/completions", chat(0, false));
  ASSERT_EQ(first.status, 200) << first.body << first.error;
  EXPECT_NE(nlohmann::json::parse(first.body)["choices"][0]["message"]["content"], nullptr);
  const std::string warm = first.header("x-gateway-destination-endpoint-served");
  ASSERT_FALSE(warm.empty());
  for (int i = 1; i <= 5; ++i) {
    auto r = client.post_json("/v1/chat/completions", chat(i, false));
    ASSERT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), warm) << "request " << i;
  }
  HttpClient streaming(kHost, sluice->port(), std::chrono::milliseconds(30000));
  auto s = streaming.stream("/v1/chat/completions", chat(6, true),
                            {{"Content-Type", "application/json"}});
  EXPECT_EQ(s.head.status, 200) << s.error;
  EXPECT_TRUE(s.complete) << s.error;
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.back().data, "[DONE]");
  EXPECT_EQ(s.head.header("x-gateway-destination-endpoint-served"), warm);
}

}  // namespace
}  // namespace sluice::test
