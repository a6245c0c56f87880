// Priority between bands: strict by default, anti-starvation shares, and a
// low-priority flood that must not delay the high band.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim.h"

namespace sluice::sim {
namespace {

const TimePoint T0{};

double mean_latency_ms(const Sim& sim, const std::string& flow, TimePoint from) {
  double sum = 0, n = 0;
  for (const auto& r : sim.records()) {
    if (r.request.flow != flow || r.arrived < from || r.finished == TimePoint{}) continue;
    sum += std::chrono::duration<double, std::milli>(r.finished - r.arrived).count();
    n += 1;
  }
  return n ? sum / n : -1;
}

double mean_wait_ms(const Sim& sim, const std::string& flow, TimePoint from) {
  double sum = 0, n = 0;
  for (const auto& r : sim.records()) {
    if (r.request.flow != flow || r.arrived < from || r.outcome != QueueOutcome::kDispatched)
      continue;
    sum += std::chrono::duration<double, std::milli>(r.decided - r.arrived).count();
    n += 1;
  }
  return n ? sum / n : -1;
}

// A high-priority flow at a quarter of the pool's capacity, alone and then
// under a low-priority flood of 10x the pool's capacity. The pool batches
// continuously (32 sequences per endpoint, output lengths 50..150 tokens at
// 1 ms each), so sequences finish every few milliseconds. Service is not
// preemptive: under the flood, a high-priority request waits for the next
// sequence to finish, never behind the flood's queue. Tolerances: queue
// wait under the flood at most 10 ms (a few completion gaps), end-to-end
// latency at most 1.2x the unloaded one.
TEST(Priority, LowPriorityFloodLeavesHighBandLatencyUnchanged) {
  PoolModel pool;
  pool.slots_per_endpoint = 32;  // ~316 req/s at ~101 ms per request
  auto run = [&](bool flood) {
    Sim sim(config_with("round-robin-fairness-policy"), pool);
    SimRequest interactive{"interactive", 100, 100, 100};
    interactive.output_jitter = 50;
    SimRequest batch{"batch", -10, 100, 100};
    batch.output_jitter = 50;
    sim.poisson(interactive, 80, T0, T0 + 40s, 7);
    if (flood) sim.poisson(batch, 3200, T0, T0 + 40s, 8);
    sim.run_until(T0 + 41s);
    return std::pair{mean_wait_ms(sim, "interactive", T0 + 5s),
                     mean_latency_ms(sim, "interactive", T0 + 5s)};
  };
  auto [wait_alone, alone] = run(false);
  auto [wait_flooded, flooded] = run(true);
  std::printf(
      "interactive: queue wait %.2f ms alone, %.2f ms under a 10x flood; "
      "latency %.1f ms alone, %.1f ms under the flood\n",
      wait_alone, wait_flooded, alone, flooded);
  ASSERT_GT(alone, 0);
  EXPECT_LT(wait_flooded, 10.0);
  EXPECT_LT(flooded, 1.2 * alone);
}

// A band with a 5% share keeps getting 5% of dispatches under constant load
// from a higher band. Tolerance: 1 percentage point.
TEST(Priority, AntiStarvationShareIsMet) {
  registry::BandConfig high{100, 0, 0, "round-robin-fairness-policy", "fcfs-ordering-policy", 0};
  registry::BandConfig low{0, 0, 0, "round-robin-fairness-policy", "fcfs-ordering-policy", 0.05};
  Sim sim(config_with("round-robin-fairness-policy", {high, low}), PoolModel{});
  sim.backlog({"hi", 100}, 30, T0, T0 + 100s);
  sim.backlog({"lo", 0}, 30, T0, T0 + 100s);
  sim.run_until(T0 + 100s);
  double hi = 0, lo = 0;
  for (const auto& r : sim.records()) {
    if (r.outcome != QueueOutcome::kDispatched || r.decided < T0 + 5s) continue;
    (r.request.priority == 100 ? hi : lo) += 1;
  }
  ASSERT_GT(hi + lo, 1000);
  EXPECT_NEAR(lo / (hi + lo), 0.05, 0.01) << "lo=" << lo << " hi=" << hi;
}

// Without a share, priority is strict: the low band gets nothing while the
// high band is backlogged.
TEST(Priority, StrictWithoutShare) {
  Sim sim(config_with("round-robin-fairness-policy"), PoolModel{});
  sim.backlog({"hi", 100}, 30, T0, T0 + 20s);
  sim.backlog({"lo", 0}, 30, T0, T0 + 20s);
  sim.run_until(T0 + 20s);
  int hi = 0, lo = 0;
  for (const auto& r : sim.records()) {
    if (r.outcome != QueueOutcome::kDispatched) continue;
    (r.request.priority == 100 ? hi : lo) += 1;
  }
  EXPECT_GT(hi, 500);
  EXPECT_EQ(lo, 0);
}

}  // namespace
}  // namespace sluice::sim
