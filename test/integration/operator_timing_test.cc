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
  constexpr int kRequests = 21;
  std::vector<Response> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      responses[static_cast<std::size_t>(i)] =
          c.post_json("/v1/completions", completion_body(10), flow("t"));
    });
  ASSERT_TRUE(eventually(
      [&] {
        auto d = json::parse(admin.request("GET", "/admin/v1/drain").body);
        return d["queued"].get<int>() >= kRequests - 2;
      },
      10000ms));
  const double served_before = scrape_metric(kHost, mock->port(), "mock_requests_total");
  ASSERT_EQ(::kill(sluice->pid(), SIGTERM), 0);
  EXPECT_EQ(sluice->wait(20000ms), 0);
  for (auto& t : clients) t.join();
  int ok = 0, evicted = 0;
  for (const auto& r : responses) {
    if (r.status == 200) {
      ++ok;
    } else {
      expect_outcome(r, 503, "evicted-other", false);
      ++evicted;
    }
  }
  EXPECT_EQ(ok + evicted, kRequests);  // every one answered
  // Some queued at SIGTERM were still served (the deadline), not all (it ended).
  EXPECT_GE(ok - static_cast<int>(served_before), 3) << ok << " ok, " << served_before << " before";
  EXPECT_GE(evicted, 3);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), ok);
}

}  // namespace
}  // namespace sluice::test
