// Graceful shutdown with a queue: on SIGTERM the queued requests are still
// dispatched until shutdownQueueDeadline; the rest end evicted-other (503).
// Every request gets an answer. Measures time: in integration_timing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

TEST(Shutdown, QueuedRequestsGetUntilTheDeadlineThenEvictedOther) {
  // One at a time, ~100 ms each; 20 queued; 1 s to dispatch after SIGTERM.
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(with_server(fc_config(mock->address(), 1, "round-robin-fairness-policy"),
                           "  shutdownQueueDeadline: 1s\n  shutdownGracePeriod: 10s\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient admin(kHost, sluice->admin_port());
  // A holder takes the only slot with a request that would run 30 s, so all
  // the clients queue however slowly they connect; its client then leaves,
  // which stops it and frees the slot just before SIGTERM.
  auto holder = std::make_unique<RawConnection>(kHost, sluice->port());
  const std::string held = completion_body(3000);
  ASSERT_TRUE(
      holder->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: " +
                   std::to_string(held.size()) + "\r\n\r\n" + held));
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
  constexpr int kRequests = 20;
  std::vector<Response> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      responses[static_cast<std::size_t>(i)] =
          c.post_json("/v1/completions", completion_body(10), flow("t"));
    });
  const bool all_queued = eventually(
      [&] {
        auto d = json::parse(admin.request("GET", "/admin/v1/drain").body);
        return d["queued"].get<int>() == kRequests;
      },
      10000ms);
  holder.reset();
  // The slot is free: the first queued request reaches the mock, as in a
  // shutdown with one request running and the rest queued.
  EXPECT_TRUE(
      eventually([&] { return scrape_metric(kHost, mock->port(), "mock_requests_total") >= 2; }));
  // The clients' requests dispatched before SIGTERM (the holder's is not one).
  const double served_before = scrape_metric(kHost, mock->port(), "mock_requests_total") - 1;
  ASSERT_EQ(::kill(sluice->pid(), SIGTERM), 0);
  EXPECT_EQ(sluice->wait(20000ms), 0);
  for (auto& t : clients) t.join();
  ASSERT_TRUE(all_queued);
  int ok = 0, evicted = 0;
  for (const auto& r : responses) {
    if (r.status == 200) {
      ++ok;
    } else {
      expect_outcome(r, 503, "evicted-other", false);
      // Counted only when it is the typed answer, so the sum below fails
      // for a request left without one (status 0) or answered otherwise.
      evicted +=
          r.status == 503 && r.header("x-gateway-inference-dropped-reason") == "evicted-other";
    }
  }
  EXPECT_EQ(ok + evicted, kRequests);  // every one answered, each typed
  // Some queued at SIGTERM were still served (the deadline), not all (it ended).
  EXPECT_GE(ok - static_cast<int>(served_before), 3) << ok << " ok, " << served_before << " before";
  EXPECT_GE(evicted, 3);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), ok + 1);  // + the holder
}

}  // namespace
}  // namespace sluice::test
