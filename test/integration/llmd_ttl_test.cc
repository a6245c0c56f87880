// llm-d v1.0's queue TTLs end to end (issue 40, item 1): a band's own
// defaultRequestTTL (0s: none) over flowControl's, and llm-d's
// x-llm-d-inference-ttl header, a Go duration that can only shorten the
// wait; and the x-llm-d-flow-queue-duration-ms answer header.
#include <nlohmann/json.hpp>
#include <thread>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

using nlohmann::json;

const std::string kQueued =
    "inference_extension_flow_control_queue_size{fairness_id=\"a\",priority=\"-10\"}";

TEST(LlmdTtl, BandTtlsAndTheHeaderShortenTheWaitNeverLengthenIt) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  // Default 200ms; band 100 waits at most 300ms; band -10 has none.
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy",
                         "  defaultRequestTTL: 200ms\n"
                         "  priorityBands:\n"
                         "  - {priority: 100, defaultRequestTTL: 300ms}\n"
                         "  - {priority: -10, defaultRequestTTL: 0s}\n"));
  auto sluice = start_sluice(cfg);
  Occupier busy(sluice->port(), *mock, 300);  // the only slot, for 3 s
  HttpClient c(kHost, sluice->port(), 10000ms);
  auto timed = [&](Headers h) {
    const auto t0 = Clock::now();
    auto r = c.post_json("/v1/completions", completion_body(1), h);
    return std::pair{r, std::chrono::duration<double, std::milli>(Clock::now() - t0).count()};
  };

  // Band -10 has no TTL: its request outlives the default's 200ms (checked
  // below, after the waits that follow), and is served once the slot frees.
  Response unbounded;
  std::thread waiter([&, port = sluice->port()] {
    HttpClient q(kHost, port, 30000ms);
    unbounded = q.post_json("/v1/completions", completion_body(1), flow("a", "best-effort"));
  });
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, sluice->admin_port(), kQueued) == 1; }));
  // The header asks for 10 s in a band of 300ms: the band's TTL holds.
  Headers longer = flow("a", "interactive");
  longer.emplace_back("x-llm-d-inference-ttl", "10s");
  auto [r1, w1] = timed(longer);
  expect_outcome(r1, 503, "evicted-ttl", true);
  EXPECT_GE(w1, 290);
  EXPECT_LT(w1, 2500) << "the header lengthened the band's TTL";

  // Shorter than the default: the header's.
  Headers shorter = flow("a");
  shorter.emplace_back("x-llm-d-inference-ttl", "50ms");
  auto [r2, w2] = timed(shorter);
  expect_outcome(r2, 503, "evicted-ttl", true);
  EXPECT_GE(w2, 45);

  // A positive header gives a TTL in a band without one.
  Headers sets = flow("a", "best-effort");
  sets.emplace_back("x-llm-d-inference-ttl", "100ms");
  auto [r3, w3] = timed(sets);
  expect_outcome(r3, 503, "evicted-ttl", true);
  EXPECT_GE(w3, 95);
  // Well past the default TTL (it was queued before the 300, 50 and 100 ms
  // waits above), the unbounded one still waits.
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), kQueued), 1);

  // Not a duration, negative, a bare number: 400, nothing queued.
  for (const char* bad : {"soon", "-1s", "5", "1.5.0s", ""}) {
    Headers h = flow("a");
    h.emplace_back("x-llm-d-inference-ttl", bad);
    auto r = c.post_json("/v1/completions", completion_body(1), h);
    if (std::string(bad).empty()) {
      // An empty header is no header: the default TTL applies.
      expect_outcome(r, 503, "evicted-ttl", true);
      continue;
    }
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid-ttl") << bad;
    EXPECT_NE(r.body.find("x-llm-d-inference-ttl"), std::string::npos) << r.body;
  }
  // Sent twice: refused as any repeated steering header.
  {
    RawConnection raw(kHost, sluice->port());
    const std::string body = completion_body(1);
    ASSERT_TRUE(
        raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Content-Type: application/json\r\nx-llm-d-inference-ttl: 1s\r\n"
                 "x-llm-d-inference-ttl: 2s\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body));
    bool closed = false;
    const std::string answer = raw.read_until_close(5000ms, &closed);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << answer;
    EXPECT_NE(answer.find("repeated-steering-header"), std::string::npos) << answer;
  }
  EXPECT_EQ(busy.finish().status, 200);
  waiter.join();
  EXPECT_EQ(unbounded.status, 200) << unbounded.body;
  // llm-d's x-llm-d-flow-queue-duration-ms: whole milliseconds in the queue.
  // The unbounded one waited through the 300, 50 and 100 ms waits above;
  // the occupier found the slot free.
  const std::string waited = unbounded.header("x-llm-d-flow-queue-duration-ms");
  ASSERT_FALSE(waited.empty());
  EXPECT_GE(std::stoll(waited), 450) << waited;
  const std::string occupier = busy.finish().header("x-llm-d-flow-queue-duration-ms");
  ASSERT_FALSE(occupier.empty());
  EXPECT_LT(std::stoll(occupier), std::stoll(waited));
  // Not held by flow control (GET /v1/models): no such header.
  auto models = c.request("GET", "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.header("x-llm-d-flow-queue-duration-ms"), "");
  // Nothing lost: the occupier and the unbounded one reached the endpoint.
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 2);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
