// Flow-control behaviour measured over time with many clients: runs alone
// (integration_timing is RUN_SERIAL) so other tests do not share its cores.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "flow_control_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

// Two flows flood a pool of 4 slots: one with 24 concurrent clients, one
// with 4. Round-robin fairness gives each half of the service; FIFO would
// give the big one ~6/7. Tolerance: 5 points over 240 requests (a window of
// requests, not of wall time: a slower build, e.g. under TSan, serves fewer
// per second but the same share).
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
  // Let both flows become backlogged, then count the next 240 served.
  ASSERT_TRUE(eventually([&] { return done_big + done_small > 40; }, 20000ms));
  const int big0 = done_big, small0 = done_small;
  constexpr int kWindow = 240;  // ~3 s under ASan
  EXPECT_TRUE(
      eventually([&] { return done_big - big0 + done_small - small0 >= kWindow; }, 20000ms));
  const int big = done_big - big0, small = done_small - small0;
  stop = true;
  for (auto& t : threads) t.join();
  std::printf("served in the window: big %d, small %d\n", big, small);
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GE(big + small, kWindow);
  EXPECT_NEAR(static_cast<double>(small) / (big + small), 0.5, 0.05);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// An interactive request under a flood of best-effort traffic (every slot
// busy, best-effort requests always queued) takes the next slot that frees,
// ahead of every best-effort request queued before it: checked by what the
// endpoint receives next, not by a latency ratio (that number is a
// benchmark's: bench/priority_flood.sh, against the same traffic alone).
TEST(FlowControl, HighPriorityTakesTheNextFreeSlotUnderALowPriorityFlood) {
  // The endpoint holds each best-effort request until the test frees one
  // slot; interactive ones are answered at once.
  std::mutex mu;
  std::condition_variable cv;
  int released = 0, holding = 0;
  FakeUpstream up([&](const UpstreamRequest& r) {
    if (r.body.find("batch") != std::string::npos) {
      std::unique_lock<std::mutex> lock(mu);
      const int mine = holding++;
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return released > mine; });
    }
    return FakeUpstream::Reply{FakeUpstream::response(200, "{\"ok\":true}")};
  });
  TempFile cfg(fc_config(up.address(), 4, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  auto queued = [&](const std::string& flow_id, int priority) {
    return scrape_metric(kHost, sluice->admin_port(),
                         "inference_extension_flow_control_queue_size{fairness_id=\"" + flow_id +
                             "\",priority=\"" + std::to_string(priority) + "\"}");
  };
  constexpr int kBatch = 16, kInteractive = 4;
  std::atomic<int> batch_ok{0}, chat_ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kBatch; ++i)
    clients.emplace_back([&] {
      HttpClient c(kHost, sluice->port(), 60000ms);
      batch_ok += c.post_json("/v1/completions", completion_body(1, false, "batch"),
                              flow("batch", "best-effort"))
                      .status == 200;
    });
  // Four slots taken, the other twelve queued.
  ASSERT_TRUE(eventually([&] { return queued("batch", -10) == kBatch - 4; }, 20000ms));
  for (int k = 0; k < kInteractive; ++k) {
    // Every request dispatched so far has reached the endpoint (the four
    // first, and per step the interactive one and the best-effort one that
    // took its slot after): what it receives next is the step's.
    ASSERT_TRUE(eventually([&] { return up.requests().size() == std::size_t(4 + 2 * k); })) << k;
    const std::size_t seen = up.requests().size();
    clients.emplace_back([&] {
      HttpClient c(kHost, sluice->port(), 60000ms);
      chat_ok += c.post_json("/v1/completions", completion_body(1, false, "chat"),
                             flow("chat", "interactive"))
                     .status == 200;
    });
    ASSERT_TRUE(eventually([&] { return queued("chat", 100) == 1; })) << k;
    {
      std::lock_guard<std::mutex> lock(mu);
      released += 1;  // one best-effort request ends: one slot frees
    }
    cv.notify_all();
    // The next request the endpoint receives is the interactive one, though
    // eleven best-effort requests were queued before it.
    ASSERT_TRUE(eventually([&] { return up.requests().size() >= seen + 1; })) << k;
    EXPECT_NE(up.requests()[seen].body.find("chat"), std::string::npos)
        << k << ": " << up.requests()[seen].body;
    // It is answered at once; a best-effort request takes its slot again.
    ASSERT_TRUE(eventually([&] { return chat_ok == k + 1; })) << k;
    ASSERT_TRUE(eventually([&] { return queued("batch", -10) == kBatch - 4 - (k + 1); })) << k;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    released = kBatch;  // the rest run out
  }
  cv.notify_all();
  for (auto& t : clients) t.join();
  EXPECT_EQ(batch_ok.load(), kBatch);
  EXPECT_EQ(chat_ok.load(), kInteractive);
  EXPECT_EQ(up.requests().size(), static_cast<std::size_t>(kBatch + kInteractive));
  EXPECT_EQ(sluice->stop(), 0);
}

// An operator changes a flow's weight while two flows flood the pool: the
// measured shares move to the new ratio (VTC, weight 3 : 1 -> 0.75 of the
// service), with no failed request. Shares are counted over windows of 200
// served requests, not of wall time, so a slower build (TSan) measures the
// same thing.
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
  // The next n served requests, split by flow.
  auto window = [&](int n) {
    const int a0 = done_a, b0 = done_b;
    EXPECT_TRUE(eventually([&] { return done_a - a0 + done_b - b0 >= n; }, 20000ms)) << n;
    return std::pair<int, int>(done_a - a0, done_b - b0);
  };
  constexpr int kWindow = 200;  // ~2.5 s under ASan
  ASSERT_TRUE(eventually([&] { return done_a + done_b > 40; }, 20000ms));
  auto [a1, b1] = window(kWindow);
  HttpClient admin(kHost, sluice->admin_port());
  auto put = admin.request("PUT", "/admin/v1/flows/a", R"({"weight": 3})",
                           {{"Content-Type", "application/json"}});
  ASSERT_EQ(put.status, 200) << put.body;
  // The change settles: only the requests in flight when it was made (the
  // pool's 4) were chosen under the old weights; from equal counters every
  // later choice follows 3:1. 40 served (10 turns of the pool) is ample.
  window(40);
  auto [a2, b2] = window(kWindow);
  stop = true;
  for (auto& t : threads) t.join();
  const double before = static_cast<double>(a1) / (a1 + b1);
  const double after = static_cast<double>(a2) / (a2 + b2);
  std::printf("share of flow a: %.3f before (weights 1:1), %.3f after (3:1); served %d, %d\n",
              before, after, a1 + b1, a2 + b2);
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GE(a1 + b1, kWindow);
  ASSERT_GE(a2 + b2, kWindow);
  EXPECT_NEAR(before, 0.5, 0.06);
  EXPECT_NEAR(after, 0.75, 0.06);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
