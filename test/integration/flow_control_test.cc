// Flow control end to end: real sluice with featureGates: [flowControl] in
// front of real sluice-mock processes. The concurrency detector gates on
// sluice's own in-flight count, so no metrics scraping is involved.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "flow_control_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using nlohmann::json;

// Clients that give up while queued are removed at once and never reach the
// model server.
TEST(FlowControl, ClientsLeavingWhileQueuedNeverReachTheEndpoint) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  const std::string queued =
      "inference_extension_flow_control_queue_size{fairness_id=\"default-flow\",priority=\"0\"}";
  {
    Occupier busy(sluice->port(), *mock);
    std::vector<std::unique_ptr<RawConnection>> waiting;
    for (int i = 0; i < 5; ++i) {
      waiting.push_back(std::make_unique<RawConnection>(kHost, sluice->port()));
      std::string body = completion_body(5);
      ASSERT_TRUE(waiting.back()->send(
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body));
    }
    // All five are queued behind the occupier before their clients leave.
    ASSERT_TRUE(
        eventually([&] { return scrape_metric(kHost, sluice->admin_port(), queued) == 5; }));
    waiting.clear();  // each connection closes here, while its request waits
    // Each leaves the queue as its client goes, before the slot frees.
    EXPECT_TRUE(eventually([&] {
      return scrape_metric(kHost, sluice->admin_port(), queued) == 0 &&
             scrape_metric(kHost, sluice->admin_port(),
                           "sluice_requests_total{outcome=\"client-closed\"}") == 5;
    }));
  }
  // The occupier finished; one more request goes through.
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(2)).status, 200);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 2);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// The same, but each client sends pipelined bytes behind its request (more
// than sluice reads ahead) and then closes: a peek at the socket returns
// those bytes, not the close, so before the liveness check looked for the
// FIN itself (POLLRDHUP) these requests were dispatched when their turn
// came and generated for nobody. Deterministic: whichever of the watch and
// the decision sees the close first, nothing may reach the endpoint.
TEST(FlowControl, ClientsLeavingBehindPipelinedBytesNeverReachTheEndpoint) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  {
    Occupier busy(sluice->port(), *mock);
    for (int i = 0; i < 5; ++i) {
      RawConnection raw(kHost, sluice->port());
      std::string body = completion_body(5);
      raw.send(
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body + std::string(32u << 10, 'p'));
    }  // each connection closes here, while its request waits
  }
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(2)).status, 200);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 2);
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(),
                         "sluice_requests_total{outcome=\"client-closed\"}") == 5;
  }));
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// A queued request ends at its TTL, by its own deadline: not when a slot
// frees. The occupier holds the only slot for 3 s from before the request
// is sent, so an expiry that waited for the next dispatch pass would answer
// after ~3 s; the upper bound lies half way, far above the 200 ms.
TEST(FlowControl, TtlExpiryIs503WithReason) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  Occupier busy(sluice->port(), *mock, 300);
  HttpClient c(kHost, sluice->port());
  Headers h = flow("a");
  h.emplace_back("x-gateway-inference-ttl-ms", "200");
  auto t0 = Clock::now();
  auto r = c.post_json("/v1/completions", completion_body(2), h);
  auto waited = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  expect_outcome(r, 503, "evicted-ttl", true);
  EXPECT_GE(waited, 190);
  // While the occupier still holds the slot: the expiry did not wait for
  // the next dispatch.
  EXPECT_EQ(
      scrape_metric(kHost, mock->port(), "vllm:num_requests_running{model_name=\"mock-model\"}"),
      1);
  // A TTL that is not a number is a client error; nothing is queued.
  Headers bad = flow("a");
  bad.emplace_back("x-gateway-inference-ttl-ms", "abc");
  auto b = c.post_json("/v1/completions", completion_body(2), bad);
  EXPECT_EQ(b.status, 400);
  EXPECT_EQ(json::parse(b.body)["error"]["code"], "invalid-ttl");
  // 0 is no TTL of the request's own, as 0 is in the config (it used to
  // expire at once), and a whole number past any clock's range is a long
  // TTL (it used to be refused): both wait for the slot and are served.
  Response zero, huge;
  auto queue_with_ttl = [&](const std::string& ttl, Response& out) {
    return std::thread([&out, ttl, port = sluice->port()] {
      Headers h = flow("a");
      h.emplace_back("x-gateway-inference-ttl-ms", ttl);
      HttpClient q(kHost, port, 30000ms);
      out = q.post_json("/v1/completions", completion_body(1), h);
    });
  };
  std::thread t_zero = queue_with_ttl("0", zero);
  std::thread t_huge = queue_with_ttl("18446744073709551616000", huge);
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(),
                         "inference_extension_flow_control_queue_size{fairness_id=\"a\","
                         "priority=\"0\"}") == 2;
  }));
  EXPECT_EQ(busy.finish().status, 200);
  t_zero.join();
  t_huge.join();
  EXPECT_EQ(zero.status, 200) << zero.body;
  EXPECT_EQ(huge.status, 200) << huge.body;
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(FlowControl, CapacityRejectionAndDisplacementOnTheWire) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy", "  maxRequests: 1\n"));
  auto sluice = start_sluice(cfg);
  Occupier busy(sluice->port(), *mock);
  // One best-effort request waits in the only queue slot.
  Response displaced;
  std::thread low(
      [&] { displaced = post_until_queued(sluice->port(), flow("bulk", "best-effort")); });
  EXPECT_TRUE(eventually([&] { return queue_full(sluice->port(), flow("bulk2", "best-effort")); }));
  {
    HttpClient probe(kHost, sluice->port());
    expect_outcome(
        probe.post_json("/v1/completions", completion_body(2), flow("bulk3", "best-effort")), 429,
        "rejected-capacity", true);
  }
  // An interactive request displaces it and is served.
  HttpClient c(kHost, sluice->port(), 30000ms);
  auto high = c.post_json("/v1/completions", completion_body(2), flow("chat", "interactive"));
  low.join();
  expect_outcome(displaced, 429, "evicted-displaced", true);
  EXPECT_EQ(high.status, 200) << high.body;
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// An unknown objective is priority 0: it lands in band 0 (here limited to
// one request), just like a request without an objective.
TEST(FlowControl, UnknownObjectiveIsPriorityZero) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy",
                         "  priorityBands:\n    - {priority: 0, maxRequests: 1}\n"));
  auto sluice = start_sluice(cfg);
  Occupier busy(sluice->port(), *mock);
  Response queued;
  std::thread t(
      [&] { queued = post_until_queued(sluice->port(), flow("x", "no-such-objective")); });
  EXPECT_TRUE(eventually([&] { return queue_full(sluice->port(), flow("y")); }));
  t.join();
  EXPECT_EQ(queued.status, 200);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(FlowControl, ShutdownAnswersQueuedRequestsEvictedOther) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  // No time to dispatch what is queued: it ends at once.
  TempFile cfg(with_server(
      fc_config(mock->address(), 1, "round-robin-fairness-policy", "  maxRequests: 1\n"),
      "  shutdownQueueDeadline: 1ms\n"));
  auto sluice = start_sluice(cfg);
  Occupier busy(sluice->port(), *mock);
  Response queued;
  std::thread t([&] { queued = post_until_queued(sluice->port(), flow("q")); });
  EXPECT_TRUE(eventually([&] { return queue_full(sluice->port(), flow("probe")); }));
  kill(sluice->pid(), SIGTERM);
  t.join();
  expect_outcome(queued, 503, "evicted-other", false);
  EXPECT_EQ(sluice->wait(20000ms), 0);
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

std::string utilization_config(const std::string& endpoint, const std::string& extra = "") {
  return "server:\n  listen: 127.0.0.1:0\n  threads: 2\n"
         "endpoints:\n  - address: " +
         endpoint +
         "\n"
         "featureGates: [flowControl]\n"
         "plugins:\n"
         "  - type: round-robin-fairness-policy\n"
         "flowControl:\n"
         "  defaultPriorityBand: {fairnessPolicyRef: round-robin-fairness-policy}\n" +
         extra;
}

// GIE's default detector: sluice scrapes the endpoint's vLLM metrics and
// releases requests only while its queue and KV cache are below the
// thresholds (queueDepthThreshold 5, kvCacheUtilThreshold 0.8). An endpoint
// whose scrape says it is full gets nothing, though sluice has no request
// in flight on it; when the scrape says there is room, the held request
// goes. (A detector that always said "room" would send it at once.)
TEST(FlowControl, UtilizationDetectorHoldsWhileTheScrapeSaysFull) {
  FakeUpstream up([](const UpstreamRequest&) {
    return FakeUpstream::Reply{FakeUpstream::response(200, "{\"ok\":true}")};
  });
  auto vllm_metrics = [](int waiting, double kv) {
    return "vllm:num_requests_waiting{model_name=\"m\"} " + std::to_string(waiting) +
           "\nvllm:num_requests_running{model_name=\"m\"} 0\n"
           "vllm:kv_cache_usage_perc{model_name=\"m\"} " +
           std::to_string(kv) + "\n";
  };
  up.set_metrics(vllm_metrics(0, 0.1));
  TempFile cfg(utilization_config(up.address()));
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  // The endpoint's last scrape as sluice holds it: (waiting, KV cache use).
  auto scraped = [&]() -> std::pair<int, double> {
    auto eps =
        nlohmann::json::parse(admin.request("GET", "/admin/v1/endpoints").body, nullptr, false);
    if (!eps.is_array() || eps.empty() || !eps[0]["metrics"].is_object()) return {-1, -1};
    return {eps[0]["metrics"]["waiting"].get<int>(),
            eps[0]["metrics"]["kvCacheUsage"].get<double>()};
  };
  auto scraped_is = [&](int waiting, double kv) {
    const auto [w, k] = scraped();
    return w == waiting && std::abs(k - kv) < 1e-6;
  };
  const std::string queued =
      "inference_extension_flow_control_queue_size{fairness_id=\"f\",priority=\"0\"}";
  ASSERT_TRUE(eventually([&] { return scraped_is(0, 0.1); }));
  HttpClient c(kHost, sluice->port(), 30000ms);
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1), flow("f")).status, 200);
  for (const auto& [waiting, kv] : {std::pair{9, 0.1}, std::pair{0, 0.95}}) {
    SCOPED_TRACE("waiting " + std::to_string(waiting) + ", kv " + std::to_string(kv));
    up.set_metrics(vllm_metrics(waiting, kv));
    ASSERT_TRUE(eventually([&] { return scraped_is(waiting, kv); }));
    const std::size_t ok_before = up.requests().size();
    Response r;
    std::thread held([&] {
      HttpClient q(kHost, sluice->port(), 30000ms);
      r = q.post_json("/v1/completions", completion_body(1), flow("f"));
    });
    EXPECT_TRUE(
        eventually([&] { return scrape_metric(kHost, sluice->admin_port(), queued) == 1; }));
    EXPECT_EQ(up.requests().size(), ok_before) << "sent to an endpoint whose scrape says full";
    up.set_metrics(vllm_metrics(0, 0.1));
    held.join();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(up.requests().size(), ok_before + 1);
  }
}

// The same detector against the mock's own metrics, under load: every
// request is served, none lost.
TEST(FlowControl, UtilizationDetectorUsesScrapedMetrics) {
  auto mock = start_mock({"--decode-ms-per-token", "2", "--max-running", "2"});
  TempFile cfg(utilization_config(mock->address()));
  auto sluice = start_sluice(cfg);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&] {
      HttpClient client(kHost, sluice->port(), 30000ms);
      for (int i = 0; i < 10; ++i)
        if (client.post_json("/v1/completions", completion_body(5), flow("f")).status == 200) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 60);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 60);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// Stale or missing metrics count as saturated: with the endpoint gone,
// nothing is released and a request ends at its TTL, typed.
TEST(FlowControl, MissingMetricsCountAsSaturated) {
  ClosedPort refusing;  // held until the test ends
  std::string dead = refusing.address();
  TempFile cfg(utilization_config(dead));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  Headers h = flow("f");
  h.emplace_back("x-gateway-inference-ttl-ms", "300");
  expect_outcome(c.post_json("/v1/completions", completion_body(1), h), 503, "evicted-ttl", true);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Per-band ceilings on the wire (llm-d's priority-holdback-policy, minCeiling
// 0.5, as configured in llm-d): on four slots the best-effort band stops at
// two in flight (dispatched while 1/4 < 0.5, held at 2/4), its other four
// requests wait, and an interactive request still goes at once. Without the
// policy four would be in flight and two queued.
TEST(FlowControl, HoldbackCeilingKeepsRoomForTheTopBand) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  std::string text = fc_config(mock->address(), 4, "round-robin-fairness-policy",
                               "  usageLimitPolicyPluginRef: holdback\n"
                               "  priorityBands:\n    - {priority: 100}\n    - {priority: -10}\n");
  text.insert(text.find("plugins:\n") + 9,
              "  - type: priority-holdback-policy\n    name: holdback\n"
              "    parameters: {minCeiling: 0.5, shape: linear, domain: rank}\n");
  TempFile cfg(text);
  auto sluice = start_sluice(cfg);
  std::vector<std::thread> batch;
  std::atomic<int> batch_ok{0};
  auto send_batch = [&](int tokens) {
    batch.emplace_back([&, tokens] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      batch_ok +=
          c.post_json("/v1/completions", completion_body(tokens), flow("batch", "best-effort"))
              .status == 200;
    });
  };
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string queued =
      "inference_extension_flow_control_queue_size{fairness_id=\"batch\",priority=\"-10\"}";
  // The band's two slots go to long requests (3 s at 10 ms a token): they
  // hold them while the test looks, however slowly the rest arrives. The
  // four that wait are short (they run after, two at a time).
  for (int i = 0; i < 2; ++i) send_batch(300);
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 2; }));
  for (int i = 0; i < 4; ++i) send_batch(10);
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(), queued) == 4 &&
           scrape_metric(kHost, mock->port(), running) == 2;
  }));
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/completions", completion_body(2), flow("chat", "interactive"));
  EXPECT_EQ(r.status, 200) << r.error;
  // Served past the held band, which still waits.
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), queued), 4);
  HttpClient admin(kHost, sluice->admin_port());
  auto bands = json::parse(admin.request("GET", "/admin/v1/bands").body);
  std::map<int, double> ceilings;
  for (const auto& b : bands) ceilings[b["priority"].get<int>()] = b.value("ceiling", -1.0);
  EXPECT_DOUBLE_EQ(ceilings[100], 1.0);
  EXPECT_DOUBLE_EQ(ceilings[-10], 0.5);
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(),
                          "sluice_flow_control_band_ceiling{priority=\"-10\"}"),
            0.5);
  EXPECT_GT(scrape_metric(kHost, sluice->admin_port(), "sluice_flow_control_ceiling_holds_total"),
            0);
  for (auto& t : batch) t.join();
  EXPECT_EQ(batch_ok.load(), 6);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Over-admission on the wire (flowControl.headroom.overAdmission): with
// both slots taken by best-effort work, an interactive request goes to the
// endpoint as a third at once. The I/O thread checks the dispatcher's choice
// against the detector again; it must apply the same allowance (it did not:
// every such request ended 503 rejected-no-endpoints, found by
// bench/priority_flood.sh), while a best-effort request still waits.
TEST(FlowControl, OverAdmissionServesTheTopBandPastAFullPool) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 2, "round-robin-fairness-policy",
                         "  headroom: {protectedPriority: 100, overAdmission: 1}\n"
                         "  priorityBands:\n    - {priority: 100}\n    - {priority: -10}\n"));
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string queued =
      "inference_extension_flow_control_queue_size{fairness_id=\"batch\",priority=\"-10\"}";
  std::vector<std::thread> batch;
  std::atomic<int> batch_ok{0};
  auto send_batch = [&](int tokens) {
    batch.emplace_back([&, tokens] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      batch_ok +=
          c.post_json("/v1/completions", completion_body(tokens), flow("batch", "best-effort"))
              .status == 200;
    });
  };
  // Both slots go to long requests (3 s at 10 ms a token): they hold them
  // while the test looks. The third, which waits, is short.
  for (int i = 0; i < 2; ++i) send_batch(300);
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 2; }));
  send_batch(10);
  ASSERT_TRUE(eventually([&] {
    return scrape_metric(kHost, mock->port(), running) == 2 &&
           scrape_metric(kHost, sluice->admin_port(), queued) == 1;
  }));
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/completions", completion_body(2), flow("chat", "interactive"));
  EXPECT_EQ(r.status, 200) << r.error << " " << r.header("x-gateway-inference-dropped-reason");
  // The third best-effort request was not let past the limit meanwhile.
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), queued), 1);
  for (auto& t : batch) t.join();
  EXPECT_EQ(batch_ok.load(), 3);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// The headroom holds on the I/O thread's fallback too. Endpoint 0 refuses
// connections; endpoint 1, the pool's last, is reserved for the protected
// band (reserveEndpoints: 1, never lent). A best-effort request goes to
// endpoint 0 (the dispatcher keeps it off the reserved one), is refused,
// and must not fall back onto the reserved endpoint: a typed 503, the
// endpoint untouched. An interactive request refused the same way falls
// back there and is served.
TEST(FlowControl, HeldHeadroomAppliesToTheFallbackAfterARefusedConnection) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  ClosedPort refusing;  // held until the test ends
  const std::string dead = refusing.address();
  TempFile cfg(fc_config(dead + "\n  - address: " + mock->address(), 4,
                         "round-robin-fairness-policy",
                         "  headroom: {protectedPriority: 100, reserveEndpoints: 1, lend: false}\n"
                         "  priorityBands:\n    - {priority: 100}\n    - {priority: -10}\n"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  auto batch = c.post_json("/v1/completions", completion_body(2), flow("batch", "best-effort"));
  EXPECT_EQ(batch.status, 503) << batch.body;
  EXPECT_EQ(batch.header("x-gateway-inference-dropped-reason"), "rejected-no-endpoints");
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 0);
  HttpClient c2(kHost, sluice->port());
  auto chat = c2.post_json("/v1/completions", completion_body(2), flow("chat", "interactive"));
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.header("x-gateway-destination-endpoint-served"), mock->address());
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 1);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// In-flight eviction on the wire (flowControl.enableEviction, llm-d's
// switch): two best-effort requests hold both slots, one answered with a
// body (no response head yet) and one streaming. Each interactive request
// evicts the newest of them: the stream gets an SSE error event naming
// the reason and then its proper end; the other gets 429 with both reason
// headers and Retry-After. The mock sees both connections close (its
// sequences are cancelled long before their 3 s would end).
TEST(FlowControl, EvictionStopsLowBandWorkInFlightWithATypedAnswer) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 2, "round-robin-fairness-policy",
                         "  enableEviction: true\n"
                         "  priorityBands:\n    - {priority: 100}\n    - {priority: -10}\n"));
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  Response whole;
  std::thread whole_client([&] {
    HttpClient c(kHost, sluice->port(), 30000ms);
    whole = c.post_json("/v1/completions", completion_body(300), flow("batch", "best-effort"));
  });
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
  std::atomic<int> events{0};
  StreamResult streamed;
  std::thread stream_client([&] {
    HttpClient c(kHost, sluice->port(), 30000ms);
    streamed = c.stream("/v1/completions", completion_body(300, true), flow("batch", "best-effort"),
                        [&](const Response&, const SseEvent&) {
                          events += 1;
                          return true;
                        });
  });
  ASSERT_TRUE(eventually([&] { return events.load() >= 2; }));
  // The first interactive request (1 s long) evicts the stream, the newest;
  // the second, finding both slots busy again, evicts the other.
  Response r1;
  std::thread first([&] {
    HttpClient c(kHost, sluice->port(), 30000ms);
    r1 = c.post_json("/v1/completions", completion_body(100), flow("chat", "interactive"));
  });
  stream_client.join();
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 2; }));
  HttpClient hi(kHost, sluice->port());
  auto r2 = hi.post_json("/v1/completions", completion_body(2), flow("chat", "interactive"));
  EXPECT_EQ(r2.status, 200) << r2.error;
  whole_client.join();
  first.join();
  EXPECT_EQ(r1.status, 200) << r1.error;

  // Mid-stream: an error event with the reason, then the end of the stream.
  ASSERT_FALSE(streamed.events.empty());
  EXPECT_NE(streamed.events.back().data.find("evicted-preempted"), std::string::npos)
      << streamed.events.back().data;
  EXPECT_TRUE(streamed.complete) << streamed.error;
  // Before the response head: a typed answer.
  expect_outcome(whole, 429, "evicted-preempted", true);
  // Neither ran its 3 s: the endpoint saw both connections close before
  // their answers' ends and stopped generating, and the counts agree.
  EXPECT_TRUE(eventually(
      [&] { return scrape_metric(kHost, mock->port(), "mock_requests_cancelled_total") == 2; }));
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 0; }));
  const auto admin = sluice->admin_port();
  EXPECT_EQ(scrape_metric(kHost, admin, "sluice_requests_total{outcome=\"evicted-preempted\"}"), 2);
  EXPECT_EQ(scrape_metric(kHost, admin, "sluice_flow_control_evictions_total{result=\"issued\"}"),
            2);
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, admin,
                         "sluice_flow_control_evictions_total{result=\"confirmed\"}") == 2;
  }));
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Engine priority (issue 12, item 4): an endpoint configured
// `schedulingPolicy: priority` (vLLM --scheduling-policy priority, here
// the mock's) gets each request's band as vLLM's "priority" (lower first:
// -100 for interactive, 10 for best-effort), never the client's own. The
// mock runs one sequence at a time and sluice lets four in: an interactive
// request that arrives behind two queued best-effort ones is served before
// them by the engine's own queue.
TEST(FlowControl, EnginePriorityReachesTheEngineAndOrdersItsQueue) {
  auto mock = start_mock(
      {"--decode-ms-per-token", "10", "--max-running", "1", "--scheduling-policy", "priority"});
  std::string text = fc_config(mock->address(), 4, "round-robin-fairness-policy");
  const std::string at = "  - address: " + mock->address() + "\n";
  text.insert(text.find(at) + at.size(), "    schedulingPolicy: priority\n");
  TempFile cfg(text);
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string waiting = "vllm:num_requests_waiting{model_name=\"mock-model\"}";
  std::mutex mu;
  std::vector<std::string> finished;
  std::vector<Response> batch(3);
  std::vector<std::thread> threads;
  auto send_batch = [&](int i, int tokens) {
    threads.emplace_back([&, i, tokens] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      batch[static_cast<std::size_t>(i)] =
          c.post_json("/v1/completions", completion_body(tokens), flow("batch", "best-effort"));
      std::lock_guard lock(mu);
      finished.push_back("batch" + std::to_string(i));
    });
  };
  // batch0 runs ~1.5 s (150 tokens at 10 ms): batch1, batch2 and then the
  // interactive request all queue in the engine while it runs, however
  // slowly they arrive.
  send_batch(0, 150);
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
  send_batch(1, 40);
  send_batch(2, 40);
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), waiting) == 2; }));
  HttpClient c(kHost, sluice->port(), 30000ms);
  auto hi = c.post_json("/v1/completions", completion_body(5), flow("chat", "interactive"));
  {
    std::lock_guard lock(mu);
    finished.push_back("interactive");
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(hi.status, 200) << hi.error;
  EXPECT_EQ(hi.header("x-mock-priority"), "-100");
  for (const auto& b : batch) {
    EXPECT_EQ(b.status, 200) << b.error;
    EXPECT_EQ(b.header("x-mock-priority"), "10");
  }
  // batch0 was running; the interactive request went before batch1 and
  // batch2, queued before it. (Not compared with batch0, which ends just
  // before it: the order two client threads see responses 50 ms apart in
  // is not the engine's. batch1 ends 400 ms after it.)
  ASSERT_EQ(finished.size(), 4u);
  auto position = [&](const std::string& name) {
    return std::find(finished.begin(), finished.end(), name) - finished.begin();
  };
  EXPECT_LT(position("interactive"), position("batch1")) << testing::PrintToString(finished);
  EXPECT_LT(position("interactive"), position("batch2")) << testing::PrintToString(finished);

  // A tenant's own priority never reaches the engine: the band's does.
  auto forged = c.post_json(
      "/v1/completions",
      R"({"model":"mock-model","prompt":"x","max_tokens":1,"priority":-1000,"priorit\u0079":-999})",
      flow("batch", "best-effort"));
  EXPECT_EQ(forged.status, 200) << forged.body;
  EXPECT_EQ(forged.header("x-mock-priority"), "10");
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// The names of a process's threads (sluice names its own).
std::vector<std::string> thread_names(pid_t pid) {
  std::vector<std::string> names;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& t : std::filesystem::directory_iterator(dir)) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  return names;
}

// server.dispatcher: with one I/O thread (auto) the dispatcher runs on that
// thread's loop — there is no dispatcher thread — and queues, orders, expires
// and answers as it does on a thread of its own; `thread` gives it one.
TEST(FlowControl, OneIoThreadDispatchesInlineAndTheThreadModeStays) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  for (const std::string mode : {"auto", "thread"}) {
    SCOPED_TRACE(mode);
    std::string config = fc_config(mock->address(), 1, "round-robin-fairness-policy");
    config.replace(config.find("threads: 2\n"), 11, "threads: 1\n  dispatcher: " + mode + "\n");
    TempFile cfg(config);
    auto sluice = start_sluice(cfg);
    ASSERT_TRUE(sluice);
    {
      Occupier busy(sluice->port(), *mock);
      // Queued behind the occupier, a 1 ms TTL expires on time: the loop's
      // deadline timer runs the pass (no request comes to wake it).
      HttpClient expiring(kHost, sluice->port());
      auto headers = flow("t");
      headers.emplace_back("x-gateway-inference-ttl-ms", "1");
      expect_outcome(expiring.post_json("/v1/completions", completion_body(1), headers), 503,
                     "evicted-ttl", true);
    }
    HttpClient c(kHost, sluice->port());
    EXPECT_EQ(c.post_json("/v1/completions", completion_body(2), flow("t")).status, 200);
    // Named by now: each thread names itself before its first work, and
    // these served requests.
    const auto names = thread_names(sluice->pid());
    EXPECT_EQ(std::count(names.begin(), names.end(), "sluice-dispatch"), mode == "thread" ? 1 : 0);
    EXPECT_EQ(std::count(names.begin(), names.end(), "sluice-io"), 1);
    EXPECT_EQ(sluice->stop(), 0);
  }
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
