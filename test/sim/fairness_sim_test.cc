// Fairness between flows of one band, checked against max-min fair oracles.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "sim.h"

namespace sluice::sim {
namespace {

const TimePoint T0{};

struct Window {
  TimePoint from, to;
};

// Requests of `flow` dispatched inside the window.
double dispatched(const Sim& sim, const std::string& flow, Window w) {
  double n = 0;
  for (const auto& r : sim.records())
    if (r.request.flow == flow && r.outcome == QueueOutcome::kDispatched && r.decided >= w.from &&
        r.decided < w.to)
      n += 1;
  return n;
}

// VTC service (inputPrice 1, outputPrice 2) of `flow` for requests dispatched
// inside the window.
double token_service(const Sim& sim, const std::string& flow, Window w) {
  double s = 0;
  for (const auto& r : sim.records())
    if (r.request.flow == flow && r.outcome == QueueOutcome::kDispatched && r.decided >= w.from &&
        r.decided < w.to)
      s += static_cast<double>(r.request.input_tokens) +
           2.0 * static_cast<double>(r.request.output_tokens);
  return s;
}

class EqualFlows : public ::testing::TestWithParam<const char*> {};

// Tolerance: 1% of the fair share.
TEST_P(EqualFlows, TwoBackloggedFlowsGetEqualService) {
  Sim sim(config_with(GetParam()), PoolModel{});
  sim.backlog({"a"}, 20, T0, T0 + 60s);
  sim.backlog({"b"}, 20, T0, T0 + 60s);
  sim.run_until(T0 + 60s);
  Window w{T0 + 5s, T0 + 55s};
  double a = dispatched(sim, "a", w), b = dispatched(sim, "b", w);
  ASSERT_GT(a + b, 1000);
  EXPECT_NEAR(a / (a + b), 0.5, 0.005) << "a=" << a << " b=" << b;
}

INSTANTIATE_TEST_SUITE_P(Policies, EqualFlows,
                         ::testing::Values("round-robin-fairness-policy", "vtc-fairness-policy"));

// global-strict-fairness-policy promises no share between flows: it serves
// the band as one queue, the best head across flows first (with FCFS, the
// oldest request of the band).
TEST(GlobalStrict, ServesTheBandAsOneQueue) {
  PoolModel pool;
  pool.slots_per_endpoint = 1;  // one at a time: dispatch order is visible
  Sim sim(config_with("global-strict-fairness-policy"), pool);
  std::vector<std::string> order = {"b", "a", "a", "c", "b", "a"};
  for (const auto& f : order) {
    sim.arrive({f});
    sim.run_for(1ms);
  }
  sim.run_for(10s);
  std::vector<const Record*> by_dispatch;
  for (const auto& r : sim.records()) by_dispatch.push_back(&r);
  std::sort(by_dispatch.begin(), by_dispatch.end(),
            [](const Record* x, const Record* y) { return x->decided < y->decided; });
  std::vector<std::string> served;
  for (const auto* r : by_dispatch) served.push_back(r->request.flow);
  EXPECT_EQ(served, order);
}

// The same over many flows that go idle and come back (the policy reuses
// the set node of the flow that went idle last for the next one that
// becomes backlogged, and moves a flow's own node when its head changes):
// 600 requests into 12 random flows, arriving in bursts and gaps, one
// served at a time; the dispatch order is the arrival order.
TEST(GlobalStrict, ServesManyFlowsGoingIdleAndBackInArrivalOrder) {
  PoolModel pool;
  pool.slots_per_endpoint = 1;
  Sim sim(config_with("global-strict-fairness-policy"), pool);
  std::mt19937 rng(11);
  std::vector<std::string> order;
  for (int i = 0; i < 600; ++i) {
    std::string f = "f" + std::to_string(rng() % 12);
    SimRequest r{f};
    r.output_tokens = 1 + rng() % 3;  // 1-3 ms of service
    sim.arrive(r);
    order.push_back(f);
    // Bursts (no gap) and gaps long enough for the queue to drain.
    sim.run_for(std::chrono::microseconds(rng() % 4 == 0 ? 8000 : (rng() % 2) * 1000));
  }
  sim.run_for(60s);
  std::vector<const Record*> by_dispatch;
  for (const auto& r : sim.records()) by_dispatch.push_back(&r);
  std::stable_sort(by_dispatch.begin(), by_dispatch.end(),
                   [](const Record* x, const Record* y) { return x->decided < y->decided; });
  std::vector<std::string> served;
  for (const auto* r : by_dispatch) {
    ASSERT_EQ(r->outcome, QueueOutcome::kDispatched);
    served.push_back(r->request.flow);
  }
  EXPECT_EQ(served, order);
}

class MaxMin : public ::testing::TestWithParam<const char*> {};

// Unequal demands, Poisson arrivals, capacity ~40 req/s: the light flow gets
// all it asks, the two heavy ones split the rest. Tolerance: 1% of each
// flow's max-min share (computed from the arrivals actually drawn).
TEST_P(MaxMin, UnequalDemandsGetTheirMaxMinShare) {
  Sim sim(config_with(GetParam()), PoolModel{});
  const TimePoint end = T0 + 300s;
  sim.poisson({"light"}, 5, T0, end, 1);
  sim.poisson({"heavy1"}, 30, T0, end, 2);
  sim.poisson({"heavy2"}, 30, T0, end, 3);
  sim.run_until(end);
  Window w{T0 + 20s, end};
  std::vector<std::string> flows = {"light", "heavy1", "heavy2"};
  std::vector<double> got, demand;
  for (const auto& f : flows) {
    got.push_back(dispatched(sim, f, w));
    double arrived = 0;
    for (const auto& r : sim.records())
      if (r.request.flow == f && r.arrived >= w.from && r.arrived < w.to) arrived += 1;
    demand.push_back(arrived);
  }
  double capacity = std::accumulate(got.begin(), got.end(), 0.0);
  auto oracle = max_min_fair(capacity, demand);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    EXPECT_NEAR(got[i], oracle[i], 0.01 * oracle[i])
        << flows[i] << ": got " << got[i] << ", max-min share " << oracle[i] << ", demand "
        << demand[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, MaxMin,
                         ::testing::Values("round-robin-fairness-policy", "vtc-fairness-policy"));

// VTC with weights 1:2:3:4 and different request shapes per flow: weighted
// token service (input + 2 x output) in proportion 1:2:3:4. Tolerance: 2%
// of each flow's target share.
TEST(Vtc, WeightedTokenServiceFollowsWeights) {
  Sim sim(config_with("vtc-fairness-policy"), PoolModel{});
  struct F {
    const char* id;
    double weight;
    std::uint64_t in, out;
  } flows[] = {{"w1", 1, 50, 200}, {"w2", 2, 200, 50}, {"w3", 3, 100, 100}, {"w4", 4, 300, 30}};
  for (auto& f : flows) sim.controller().registry().set_configured_weight(f.id, f.weight);
  for (auto& f : flows) sim.backlog({f.id, 0, f.in, f.out}, 20, T0, T0 + 200s);
  sim.run_until(T0 + 200s);
  Window w{T0 + 20s, T0 + 190s};
  double total = 0;
  for (auto& f : flows) total += token_service(sim, f.id, w);
  for (auto& f : flows) {
    double share = token_service(sim, f.id, w) / total;
    double target = f.weight / 10.0;
    EXPECT_NEAR(share, target, 0.02 * target) << f.id;
  }
}

// A flow that was idle gets no burst of saved-up credit when it returns: in
// the first seconds back it gets about its 1/3 share, not everything.
TEST(Vtc, ReturningFlowGetsNoSavedUpCredit) {
  Sim sim(config_with("vtc-fairness-policy"), PoolModel{});
  sim.backlog({"a"}, 20, T0, T0 + 90s);
  sim.backlog({"b"}, 20, T0, T0 + 90s);
  sim.backlog({"late"}, 20, T0 + 45s, T0 + 90s);  // idle for the first 45 s
  sim.run_until(T0 + 90s);
  Window first{T0 + 45s, T0 + 48s};
  double late = dispatched(sim, "late", first);
  double all = late + dispatched(sim, "a", first) + dispatched(sim, "b", first);
  ASSERT_GT(all, 60);
  // Tolerance: 1/3 +- 0.08 over a 3 s window (~120 dispatches).
  EXPECT_NEAR(late / all, 1.0 / 3, 0.08) << late << " of " << all;
  Window rest{T0 + 50s, T0 + 88s};
  double r_late = dispatched(sim, "late", rest), r_a = dispatched(sim, "a", rest);
  EXPECT_NEAR(r_late / r_a, 1.0, 0.02);
}

}  // namespace
}  // namespace sluice::sim
