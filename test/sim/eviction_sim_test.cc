// In-flight eviction on a fake clock: who is evicted (priority < 0 only,
// lowest band first, newest dispatch first), pacing (one at a time, the next
// only after the last is confirmed and its grace has passed), and the wait
// budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim.h"

namespace sluice::sim {
namespace {

const TimePoint T0{};

ControllerConfig bands(EvictionConfig e) {
  auto c = config_with("round-robin-fairness-policy",
                       {rr_band(100), rr_band(0), rr_band(-5), rr_band(-10)});
  c.eviction = e;
  return c;
}

EvictionConfig on() {
  EvictionConfig e;
  e.enabled = true;
  e.grace = 10ms;
  return e;
}

PoolModel one_endpoint(std::uint64_t slots) {
  PoolModel p;
  p.slots_per_endpoint = slots;
  p.per_output_token = 10ms;  // 100 tokens: ~1 s per request
  return p;
}

std::vector<const Record*> evicted(const Sim& sim) {
  std::vector<const Record*> out;
  for (const auto& r : sim.records())
    if (r.evicted) out.push_back(&r);
  return out;
}

// The pool full of -10, -5 and 0 work (dispatched in that order, oldest
// first); one request of band 100 arrives: the newest -10 request goes, and
// nothing of -5 or 0 (0 is not sheddable). The 100 request takes its slot
// once the eviction is confirmed.
TEST(Eviction, LowestBandNewestDispatchFirstAndOnlyBelowZero) {
  Sim sim(bands(on()), one_endpoint(6));
  sim.at(T0, [&] {
    sim.arrive({"low", -10});
    sim.arrive({"low", -10});
  });
  sim.at(T0 + 1ms, [&] {
    sim.arrive({"mid", -5});
    sim.arrive({"mid", -5});
  });
  sim.at(T0 + 2ms, [&] {
    sim.arrive({"zero", 0});
    sim.arrive({"zero", 0});
  });
  std::size_t hi = 0;
  sim.at(T0 + 100ms, [&] { hi = sim.arrive({"hi", 100}); });
  sim.run_until(T0 + 150ms);
  auto ev = evicted(sim);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]->request.flow, "low");
  EXPECT_EQ(ev[0], &sim.records()[1]);  // the newer of the two
  EXPECT_EQ(sim.records()[hi].outcome, QueueOutcome::kDispatched);
  EXPECT_EQ(sim.records()[hi].decided, T0 + 100ms + sim.eviction_confirm_delay);
  EXPECT_EQ(sim.controller().eviction_stats().issued, 1u);
  EXPECT_EQ(sim.controller().eviction_stats().confirmed, 1u);
}

// Only non-sheddable work in flight: nothing is evicted, the request waits.
TEST(Eviction, NothingSheddableInFlightEvictsNothing) {
  Sim sim(bands(on()), one_endpoint(2));
  sim.at(T0, [&] {
    sim.arrive({"zero", 0});
    sim.arrive({"zero", 0});
  });
  std::size_t hi = 0;
  sim.at(T0 + 10ms, [&] { hi = sim.arrive({"hi", 100}); });
  sim.run_until(T0 + 3s);
  EXPECT_TRUE(evicted(sim).empty());
  EXPECT_GE(sim.records()[hi].decided, T0 + 1s);  // after a completion
}

// Five high requests arrive at once on a pool full of batch work: evictions
// go one at a time, each after the previous is confirmed (1 ms) and its
// grace (10 ms) has passed, so they are at least 11 ms apart.
TEST(Eviction, PacedByConfirmationAndGrace) {
  Sim sim(bands(on()), one_endpoint(8));
  sim.at(T0, [&] {
    for (int i = 0; i < 8; ++i) sim.arrive({"low", -10});
  });
  sim.at(T0 + 50ms, [&] {
    for (int i = 0; i < 5; ++i) sim.arrive({"hi", 100});
  });
  sim.run_until(T0 + 500ms);
  auto ev = evicted(sim);
  ASSERT_EQ(ev.size(), 5u);
  std::vector<TimePoint> at;
  for (const auto* r : ev) at.push_back(r->finished - sim.eviction_confirm_delay);
  std::sort(at.begin(), at.end());
  for (std::size_t i = 1; i < at.size(); ++i)
    EXPECT_GE(at[i] - at[i - 1], 11ms) << "eviction " << i;
  for (const auto& r : sim.records()) {
    if (r.request.flow == "hi") {
      EXPECT_EQ(r.outcome, QueueOutcome::kDispatched);
    }
  }
}

// sluice's extensions: eligible bands (only -5 here, so -10 is kept) and a
// wait budget (evict only for a request that waited 200 ms).
TEST(Eviction, EligibleBandsAndWaitBudget) {
  EvictionConfig e = on();
  e.priorities = {-5};
  e.wait_budget = 200ms;
  Sim sim(bands(e), one_endpoint(4));
  sim.at(T0, [&] {
    sim.arrive({"low", -10});
    sim.arrive({"low", -10});
    sim.arrive({"mid", -5});
    sim.arrive({"mid", -5});
  });
  std::size_t hi = 0;
  sim.at(T0 + 10ms, [&] { hi = sim.arrive({"hi", 100}); });
  sim.run_until(T0 + 400ms);
  auto ev = evicted(sim);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]->request.flow, "mid");
  // Evicted when the budget ran out (the controller woke for it), not before.
  EXPECT_EQ(ev[0]->finished - sim.eviction_confirm_delay, T0 + 210ms);
  EXPECT_EQ(sim.records()[hi].decided, T0 + 210ms + sim.eviction_confirm_delay);
}

// Eviction off (llm-d's default): the high request waits for a completion.
TEST(Eviction, OffByDefault) {
  Sim sim(bands({}), one_endpoint(2));
  sim.at(T0, [&] {
    sim.arrive({"low", -10});
    sim.arrive({"low", -10});
  });
  std::size_t hi = 0;
  sim.at(T0 + 10ms, [&] { hi = sim.arrive({"hi", 100}); });
  sim.run_until(T0 + 3s);
  EXPECT_TRUE(evicted(sim).empty());
  EXPECT_GE(sim.records()[hi].decided, T0 + 1s);
}

}  // namespace
}  // namespace sluice::sim
