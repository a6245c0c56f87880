// Flow-control behaviour measured over time with many clients: runs alone
// (integration_timing is RUN_SERIAL) so other tests do not share its cores.
#include <algorithm>
#include <atomic>
#include <thread>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

// Two flows flood a pool of 4 slots: one with 24 concurrent clients, one
// with 4. Round-robin fairness gives each half of the service; FIFO would
// give the big one ~6/7. Tolerance: 5 points.
TEST(FlowControl, TwoFloodingFlowsShareThePoolEqually) {
  auto mock = start_mock({"--decode-ms-per-token", "5", "--max-running", "4"});
  TempFile cfg(fc_config(mock->address(), 4, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  std::atomic<bool> stop{false};
  std::atomic<int> done_big{0}, done_small{0}, errors{0};
  auto client = [&](const std::string& id, std::atomic<int>& done) {
    HttpClient c(kHost, sluice->port(), 30000ms);
    while (!stop) {
      auto r = c.post_json("/v1/completions", completion_body(8), flow(id));
      if (r.status == 200) {
        if (!stop) ++done;
      } else {
        ++errors;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 24; ++i) threads.emplace_back(client, "big", std::ref(done_big));
  for (int i = 0; i < 4; ++i) threads.emplace_back(client, "small", std::ref(done_small));
  // Let both flows become backlogged, then count over a fixed window.
  ASSERT_TRUE(eventually([&] { return done_big + done_small > 40; }, 20000ms));
  int big0 = done_big, small0 = done_small;
  std::this_thread::sleep_for(3s);  // the measurement window (not a synchronisation)
  int big = done_big - big0, small = done_small - small0;
  stop = true;
  for (auto& t : threads) t.join();
  std::printf("served in the window: big %d, small %d\n", big, small);
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GT(big + small, 60);
  EXPECT_NEAR(static_cast<double>(small) / (big + small), 0.5, 0.05);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// An interactive flow's latency under a flood of best-effort traffic (the
// pool saturated, best-effort requests always queued) stays within 1.2x of
// its latency alone. Service is not preemptive: an interactive request may
// wait for one short batch request to finish.
TEST(FlowControl, HighPriorityLatencyHoldsUnderALowPriorityFlood) {
  auto mock = start_mock({"--decode-ms-per-token", "5", "--max-running", "4"});
  TempFile cfg(fc_config(mock->address(), 4, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  auto measure = [&] {
    HttpClient c(kHost, sluice->port(), 30000ms);
    std::vector<double> ms;
    for (int i = 0; i < 8; ++i) {
      auto t0 = Clock::now();
      auto r = c.post_json("/v1/completions", completion_body(80), flow("chat", "interactive"));
      EXPECT_EQ(r.status, 200);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  double alone = measure();
  std::atomic<bool> stop{false};
  std::atomic<int> flood_done{0};
  std::vector<std::thread> flood;
  // Three times as many flood clients as slots: low-priority requests are
  // always waiting, i.e. the pool is flooded, without the client threads
  // themselves eating the two cores that sluice and the mock run on.
  for (int i = 0; i < 12; ++i) {
    flood.emplace_back([&] {
      HttpClient c(kHost, sluice->port(), 60000ms);
      while (!stop) {
        if (c.post_json("/v1/completions", completion_body(10), flow("batch", "best-effort"))
                .status == 200)
          ++flood_done;
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return flood_done > 20; }, 20000ms));
  double flooded = measure();
  stop = true;
  for (auto& t : flood) t.join();
  std::printf("interactive median latency: %.1f ms alone, %.1f ms under the flood\n", alone,
              flooded);
  EXPECT_LT(flooded, 1.2 * alone);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// An operator changes a flow's weight while two flows flood the pool: the
// measured shares move to the new ratio (VTC, weight 3 : 1 -> 0.75 of the
// service), with no failed request.
TEST(FlowControl, WeightChangeUnderFloodMovesTheShares) {
  auto mock = start_mock({"--decode-ms-per-token", "5", "--max-running", "4"});
  TempFile cfg(fc_config(mock->address(), 4, "vtc-fairness-policy"));
  auto sluice = start_sluice(cfg);
  std::atomic<bool> stop{false};
  std::atomic<int> done_a{0}, done_b{0}, errors{0};
  auto client = [&](const std::string& id, std::atomic<int>& done) {
    HttpClient c(kHost, sluice->port(), 30000ms);
    while (!stop) {
      auto r = c.post_json("/v1/completions", completion_body(8), flow(id));
      if (r.status == 200)
        ++done;
      else
        ++errors;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) threads.emplace_back(client, "a", std::ref(done_a));
  for (int i = 0; i < 12; ++i) threads.emplace_back(client, "b", std::ref(done_b));
  auto window = [&] {
    int a0 = done_a, b0 = done_b;
    std::this_thread::sleep_for(2500ms);  // the measurement window (not a synchronisation)
    return std::pair<int, int>(done_a - a0, done_b - b0);
  };
  ASSERT_TRUE(eventually([&] { return done_a + done_b > 40; }, 20000ms));
  auto [a1, b1] = window();
  HttpClient admin(kHost, sluice->admin_port());
  auto put = admin.request("PUT", "/admin/v1/flows/a", R"({"weight": 3})",
                           {{"Content-Type", "application/json"}});
  ASSERT_EQ(put.status, 200) << put.body;
  std::this_thread::sleep_for(1000ms);  // the change settles (VTC counters converge)
  auto [a2, b2] = window();
  stop = true;
  for (auto& t : threads) t.join();
  const double before = static_cast<double>(a1) / (a1 + b1);
  const double after = static_cast<double>(a2) / (a2 + b2);
  std::printf("share of flow a: %.3f before (weights 1:1), %.3f after (3:1); served %d, %d\n",
              before, after, a1 + b1, a2 + b2);
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GT(a1 + b1, 60);
  ASSERT_GT(a2 + b2, 60);
  EXPECT_NEAR(before, 0.5, 0.06);
  EXPECT_NEAR(after, 0.75, 0.06);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
