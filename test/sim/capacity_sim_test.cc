// Limits, displacement, TTL expiry and cancellation, each at its boundary.
#include <gtest/gtest.h>

#include "sim.h"

namespace sluice::sim {
namespace {

const TimePoint T0 = TimePoint{} + 1s;

// A pool that never has room: everything stays queued.
PoolModel full_pool() {
  PoolModel p;
  p.slots_per_endpoint = 0;
  return p;
}

ControllerConfig limits(std::uint64_t max_requests, std::uint64_t max_bytes,
                        bool displacement = true) {
  ControllerConfig c = config_with("round-robin-fairness-policy");
  c.registry.max_requests = max_requests;
  c.registry.max_bytes = max_bytes;
  c.displacement = displacement ? "lowest-band-newest-first" : "none";
  return c;
}

std::optional<QueueOutcome> outcome(const Sim& sim, std::size_t id) {
  return sim.records()[id].outcome;
}

// Decision::waited says whether a dispatched request was held in the queue:
// released in the pass that admitted it, it did not wait (the I/O thread
// then sends it without looking whether its client is still there); held
// until a completion freed a slot, it did.
TEST(Capacity, ADispatchSaysWhetherTheRequestWaitedInTheQueue) {
  PoolModel pool;
  pool.slots_per_endpoint = 1;
  Sim sim(limits(0, 0), pool);
  sim.run_until(T0);
  auto first = sim.arrive({"a"});
  auto second = sim.arrive({"a"});  // the only slot is taken
  EXPECT_EQ(outcome(sim, first), QueueOutcome::kDispatched);
  EXPECT_FALSE(sim.records()[first].waited);
  EXPECT_FALSE(outcome(sim, second).has_value());
  sim.run_for(1s);  // the first completes; the second is released then
  EXPECT_EQ(outcome(sim, second), QueueOutcome::kDispatched);
  EXPECT_TRUE(sim.records()[second].waited);
  EXPECT_GT(sim.records()[second].decided, sim.records()[second].arrived);
}

TEST(Capacity, RequestLimitRejectsExactlyAtTheBoundary) {
  Sim sim(limits(3, 0), full_pool());
  sim.run_until(T0);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(outcome(sim, sim.arrive({"a"})).has_value());
  auto fourth = sim.arrive({"a"});
  EXPECT_EQ(outcome(sim, fourth), QueueOutcome::kRejectedCapacity);
  EXPECT_EQ(sim.controller().queued(), 3u);
}

TEST(Capacity, ByteLimitRejectsExactlyAtTheBoundary) {
  Sim sim(limits(0, 1000), full_pool());
  sim.run_until(T0);
  EXPECT_FALSE(outcome(sim, sim.arrive({"a", 0, 1, 1, 400})).has_value());
  EXPECT_FALSE(outcome(sim, sim.arrive({"a", 0, 1, 1, 400})).has_value());
  EXPECT_EQ(outcome(sim, sim.arrive({"a", 0, 1, 1, 201})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, sim.arrive({"a", 0, 1, 1, 200})).has_value());  // exactly 1000
  EXPECT_EQ(outcome(sim, sim.arrive({"a", 0, 1, 1, 1})), QueueOutcome::kRejectedCapacity);
  EXPECT_EQ(sim.controller().registry().total_bytes(), 1000u);
}

TEST(Capacity, BandLimitRejectsAndNeverDisplacesItsOwnPriority) {
  ControllerConfig c = limits(0, 0);
  c.registry.bands.push_back({5, 0, 2, "round-robin-fairness-policy", "fcfs-ordering-policy", 0});
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a = sim.arrive({"a", 5});
  auto b = sim.arrive({"b", 5});
  EXPECT_EQ(outcome(sim, sim.arrive({"c", 5})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, a).has_value());
  EXPECT_FALSE(outcome(sim, b).has_value());
}

// Fair admission: in a full band a newcomer takes the place of the newest
// request of the longest flow, while that flow stays at least as long as
// the newcomer's; then the band is shared and nobody else gives way.
TEST(Capacity, AFullBandMakesItsLongestFlowGiveWay) {
  ControllerConfig c = limits(0, 0);
  c.registry.bands.push_back({5, 0, 4, "round-robin-fairness-policy", "fcfs-ordering-policy", 0});
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  std::vector<std::size_t> flood;
  for (int i = 0; i < 4; ++i) flood.push_back(sim.arrive({"flood", 5}));
  auto b1 = sim.arrive({"b", 5});
  EXPECT_FALSE(outcome(sim, b1).has_value());
  EXPECT_EQ(outcome(sim, flood[3]), QueueOutcome::kEvictedDisplaced);  // its newest
  auto b2 = sim.arrive({"b", 5});
  EXPECT_FALSE(outcome(sim, b2).has_value());
  EXPECT_EQ(outcome(sim, flood[2]), QueueOutcome::kEvictedDisplaced);
  // 2 and 2: the newcomer would be longer than the flood; it is turned away.
  EXPECT_EQ(outcome(sim, sim.arrive({"b", 5})), QueueOutcome::kRejectedCapacity);
  EXPECT_EQ(outcome(sim, sim.arrive({"flood", 5})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, flood[0]).has_value());
  EXPECT_FALSE(outcome(sim, flood[1]).has_value());
  EXPECT_EQ(sim.controller().queued(), 4u);
}

// All or nothing: when the pool's byte limit would still refuse the
// newcomer after the band made room, no one is evicted.
TEST(Capacity, FairAdmissionEvictsNothingWhenTheGlobalLimitStillRefuses) {
  ControllerConfig c = limits(0, 100);
  c.registry.bands.push_back({5, 0, 2, "round-robin-fairness-policy", "fcfs-ordering-policy", 0});
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a1 = sim.arrive({"flood", 5, 1, 1, 40});
  auto a2 = sim.arrive({"flood", 5, 1, 1, 40});
  // Band full (2 requests) and 80 of 100 bytes used: a 70-byte newcomer
  // would need 50 bytes freed, one 40-byte eviction gives 40.
  EXPECT_EQ(outcome(sim, sim.arrive({"b", 5, 1, 1, 70})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, a1).has_value());
  EXPECT_FALSE(outcome(sim, a2).has_value());
  EXPECT_EQ(sim.controller().queued(), 2u);
  // A 50-byte one fits once one request is gone: admitted, one evicted.
  EXPECT_FALSE(outcome(sim, sim.arrive({"b", 5, 1, 1, 50})).has_value());
  EXPECT_EQ(outcome(sim, a2), QueueOutcome::kEvictedDisplaced);
}

TEST(Capacity, FairAdmissionIsOffWithoutDisplacement) {
  ControllerConfig c = limits(0, 0, /*displacement=*/false);
  c.registry.bands.push_back({5, 0, 2, "round-robin-fairness-policy", "fcfs-ordering-policy", 0});
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a1 = sim.arrive({"flood", 5});
  auto a2 = sim.arrive({"flood", 5});
  EXPECT_EQ(outcome(sim, sim.arrive({"b", 5})),
            QueueOutcome::kRejectedCapacity);  // GIE: reject the newcomer
  EXPECT_FALSE(outcome(sim, a1).has_value());
  EXPECT_FALSE(outcome(sim, a2).has_value());
}

TEST(Displacement, EvictsOnlyLowerPriorityNewestFirst) {
  Sim sim(limits(4, 0), full_pool());
  sim.run_until(T0);
  auto low_old = sim.arrive({"batch", -10});
  auto low_new = sim.arrive({"batch", -10});
  auto mid = sim.arrive({"std", 0});
  auto mid2 = sim.arrive({"std", 0});
  // Full. A high-priority newcomer pushes out the lowest band's newest.
  auto high = sim.arrive({"chat", 100});
  EXPECT_FALSE(outcome(sim, high).has_value());
  EXPECT_EQ(outcome(sim, low_new), QueueOutcome::kEvictedDisplaced);
  EXPECT_FALSE(outcome(sim, low_old).has_value());
  // Equal priority is never displaced: a priority-0 newcomer can only take
  // the remaining -10 request's place.
  auto mid3 = sim.arrive({"std", 0});
  EXPECT_FALSE(outcome(sim, mid3).has_value());
  EXPECT_EQ(outcome(sim, low_old), QueueOutcome::kEvictedDisplaced);
  auto mid4 = sim.arrive({"std", 0});
  EXPECT_EQ(outcome(sim, mid4), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, mid).has_value());
  EXPECT_FALSE(outcome(sim, mid2).has_value());
  // A sheddable newcomer displaces nothing.
  EXPECT_EQ(outcome(sim, sim.arrive({"batch", -10})), QueueOutcome::kRejectedCapacity);
  EXPECT_EQ(sim.controller().queued(), 4u);
}

TEST(Displacement, ByteLimitFreesEnoughOrNothing) {
  Sim sim(limits(0, 1000), full_pool());
  sim.run_until(T0);
  auto l1 = sim.arrive({"low", -1, 1, 1, 300});
  auto l2 = sim.arrive({"low", -1, 1, 1, 300});
  auto h1 = sim.arrive({"high", 10, 1, 1, 400});
  // 1000 used. A 900-byte high request needs 900 freed, but only 600 bytes
  // are lower priority: nothing is evicted, the newcomer is rejected.
  EXPECT_EQ(outcome(sim, sim.arrive({"high", 10, 1, 1, 900})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, l1).has_value());
  EXPECT_FALSE(outcome(sim, l2).has_value());
  // A 500-byte one needs 500: both low requests go (newest first, then older).
  auto h2 = sim.arrive({"high", 10, 1, 1, 500});
  EXPECT_FALSE(outcome(sim, h2).has_value());
  EXPECT_EQ(outcome(sim, l2), QueueOutcome::kEvictedDisplaced);
  EXPECT_EQ(outcome(sim, l1), QueueOutcome::kEvictedDisplaced);
  EXPECT_FALSE(outcome(sim, h1).has_value());
  EXPECT_EQ(sim.controller().registry().total_bytes(), 900u);
}

// A displacement plugin that picks the wrong victims (here: everything
// queued, whatever its priority) cannot displace equal or higher priority:
// the controller evicts nothing and rejects the newcomer.
TEST(Displacement, AFaultyPolicyCannotEvictEqualPriority) {
  struct Greedy final : DisplacementPolicy {
    std::string_view type() const override { return "greedy"; }
    std::vector<std::uint64_t> choose(const DisplacementView&, int, std::uint64_t,
                                      std::uint64_t) override {
      return all;
    }
    std::vector<std::uint64_t> all;
  };
  Sim sim(limits(2, 0), full_pool());
  auto greedy = std::make_unique<Greedy>();
  Greedy* g = greedy.get();
  sim.controller().set_displacement_policy(std::move(greedy));
  sim.run_until(T0);
  auto a = sim.arrive({"a", 5});
  auto b = sim.arrive({"b", 0});
  g->all = {sim.records()[a].ticket, sim.records()[b].ticket};
  EXPECT_EQ(outcome(sim, sim.arrive({"c", 5})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, a).has_value());
  EXPECT_FALSE(outcome(sim, b).has_value());
  // The same choice for a newcomer above both is fine.
  auto top = sim.arrive({"top", 9});
  EXPECT_FALSE(outcome(sim, top).has_value());
  EXPECT_EQ(outcome(sim, a), QueueOutcome::kEvictedDisplaced);
  EXPECT_EQ(outcome(sim, b), QueueOutcome::kEvictedDisplaced);
}

TEST(Displacement, OffMeansRejectTheNewcomer) {
  Sim sim(limits(1, 0, false), full_pool());
  sim.run_until(T0);
  auto low = sim.arrive({"low", -1});
  EXPECT_EQ(outcome(sim, sim.arrive({"high", 10})), QueueOutcome::kRejectedCapacity);
  EXPECT_FALSE(outcome(sim, low).has_value());
}

// Expiry fires at the deadline (fake clock: to the nanosecond; the
// requirement is 1 ms) and frees capacity at once.
TEST(Ttl, ExpiresAtTheDeadline) {
  ControllerConfig c = limits(2, 0);
  c.default_ttl = 10s;
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a = sim.arrive({"a", 0, 1, 1, 1, 250ms});  // own TTL, smaller than the default
  sim.run_for(100ms);
  auto b = sim.arrive({"b"});  // default TTL
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 250ms);
  sim.run_until(T0 + 5s);
  ASSERT_EQ(outcome(sim, a), QueueOutcome::kEvictedTTL);
  auto late = sim.records()[a].decided - (T0 + 250ms);
  EXPECT_GE(late, 0ms);
  EXPECT_LT(late, 1ms);
  EXPECT_FALSE(outcome(sim, b).has_value());
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 100ms + 10s);
  // The expired request's place is free again.
  EXPECT_FALSE(outcome(sim, sim.arrive({"c"})).has_value());
}

// llm-d's noEndpointRequestTTL: while every endpoint is removed the
// regime's TTL applies (from the enqueue time), re-evaluated when the pool
// empties or refills; what expires while it is empty is rejected-no-endpoints.
void set_pool_removed(Sim& sim, bool removed) {
  sim.controller().set_endpoints({EndpointIdentity{"", "", {}, removed}});
}

TEST(Ttl, NoEndpointTtlAppliesWhileThePoolIsEmpty) {
  ControllerConfig c = limits(0, 0);
  c.default_ttl = 60s;
  c.no_endpoint_ttl_set = true;
  c.no_endpoint_ttl = 2s;
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a = sim.arrive({"a"});  // queued with the pool up: 60 s
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 60s);
  sim.run_until(T0 + 3s);
  set_pool_removed(sim, true);  // empty at T0 + 3 s: a's budget is now 2 s, overdue
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 2s);
  sim.run_for(1ms);
  EXPECT_EQ(outcome(sim, a), QueueOutcome::kRejectedNoEndpoints);
  auto b = sim.arrive({"b", 0, 1, 1, 1, 1s});  // its own TTL is smaller: T0 + 4.001 s
  auto d = sim.arrive({"d"});                  // the regime's: T0 + 5.001 s
  sim.run_until(T0 + 4500ms);
  EXPECT_EQ(outcome(sim, b), QueueOutcome::kRejectedNoEndpoints);
  EXPECT_LT(sim.records()[b].decided - (T0 + 4001ms), 1ms);
  EXPECT_FALSE(outcome(sim, d).has_value());
  // The pool comes back before d's 2 s are up: d has 60 s again.
  set_pool_removed(sim, false);
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 3001ms + 60s);
  sim.run_until(T0 + 6s);
  EXPECT_FALSE(outcome(sim, d).has_value());
}

TEST(Ttl, NoEndpointTtlZeroWaitsForTheFleetThenTheDefaultAppliesAgain) {
  ControllerConfig c = limits(0, 0);
  c.default_ttl = 10s;
  c.no_endpoint_ttl_set = true;  // 0: no expiry while empty
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  set_pool_removed(sim, true);
  auto a = sim.arrive({"a"});
  auto own = sim.arrive({"b", 0, 1, 1, 1, 30s});
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 30s);  // only its own TTL
  sim.run_until(T0 + 20s);
  EXPECT_FALSE(outcome(sim, a).has_value());
  // Back after 20 s: a's 10 s default is long past, it expires as a TTL
  // (the pool is up); b keeps the smaller of its own and the default.
  set_pool_removed(sim, false);
  sim.run_for(1ms);
  EXPECT_EQ(outcome(sim, a), QueueOutcome::kEvictedTTL);
  EXPECT_EQ(outcome(sim, own), QueueOutcome::kEvictedTTL);
}

TEST(Ttl, WithoutNoEndpointTtlTheDefaultHoldsAndAnEmptyPoolSaysSo) {
  ControllerConfig c = limits(0, 0);
  c.default_ttl = 3s;
  Sim sim(std::move(c), full_pool());
  sim.run_until(T0);
  auto a = sim.arrive({"a"});
  set_pool_removed(sim, true);
  EXPECT_EQ(sim.controller().next_deadline(), T0 + 3s);
  sim.run_until(T0 + 3s + 1ms);
  EXPECT_EQ(outcome(sim, a), QueueOutcome::kRejectedNoEndpoints);
}

TEST(Cancel, FreesCapacityAtOnce) {
  Sim sim(limits(2, 0), full_pool());
  sim.run_until(T0);
  auto a = sim.arrive({"a"});
  sim.arrive({"a"});
  EXPECT_EQ(outcome(sim, sim.arrive({"a"})), QueueOutcome::kRejectedCapacity);
  sim.cancel(a);
  EXPECT_EQ(outcome(sim, a), QueueOutcome::kEvictedContextCancelled);
  EXPECT_FALSE(outcome(sim, sim.arrive({"a"})).has_value());
  // A stale ticket (already finalized) is ignored.
  sim.cancel(a);
  EXPECT_EQ(sim.controller().queued(), 2u);
}

TEST(Shutdown, EveryQueuedRequestEndsEvictedOther) {
  Sim sim(limits(0, 0), full_pool());
  sim.run_until(T0);
  for (int i = 0; i < 5; ++i) sim.arrive({"f" + std::to_string(i % 2), i % 3});
  sim.controller().shutdown(sim.now());
  for (const auto& r : sim.records()) EXPECT_EQ(r.outcome, QueueOutcome::kEvictedOther);
  EXPECT_EQ(sim.controller().queued(), 0u);
}

TEST(Endpoints, EmptyPoolRejectsWithNoEndpoints) {
  PoolModel p;
  p.endpoints = 0;
  Sim sim(limits(0, 0), p);
  sim.run_until(T0);
  EXPECT_EQ(outcome(sim, sim.arrive({"a"})), QueueOutcome::kRejectedNoEndpoints);
}

// In-flight credit: with the utilization detector, a burst between scrapes
// releases only what the last scrape plus the dispatches since allow.
TEST(Saturation, InFlightCreditStopsOvershootBetweenScrapes) {
  std::vector<Decision> decisions;
  Controller c(config_with("round-robin-fairness-policy"),
               std::make_unique<UtilizationDetector>(UtilizationParams{5, 0.8, 200ms, 0}),
               [&](const Decision& d) { decisions.push_back(d); });
  c.set_endpoint_count(2);
  const TimePoint now = T0;
  c.update_metrics(0, {0, 0, 0.1}, now);
  c.update_metrics(1, {3, 0, 0.1}, now);
  for (int i = 0; i < 100; ++i) {
    EnqueueRequest r;
    r.cookie = static_cast<std::uint64_t>(i);
    c.enqueue(r, now);
  }
  c.dispatch(now);
  // Endpoint 0 takes 5 (0 waiting + 5 credit), endpoint 1 takes 2 (3 + 2).
  EXPECT_EQ(decisions.size(), 7u);
  EXPECT_EQ(c.queued(), 93u);
  // A fresh scrape that shows the queues drained opens room again.
  c.update_metrics(0, {0, 5, 0.2}, now + 50ms);
  c.update_metrics(1, {0, 5, 0.2}, now + 50ms);
  c.dispatch(now + 50ms);
  EXPECT_EQ(decisions.size(), 17u);
  // Stale metrics count as saturated.
  c.dispatch(now + 50ms + 201ms);
  EXPECT_EQ(decisions.size(), 17u);
}

}  // namespace
}  // namespace sluice::sim

namespace sluice::sim {
namespace {

// Issue 11, defect 7: each request's tokens (its prompt and its client's
// max_tokens) are summed into its endpoint's in-flight tokens, which a
// tokens-mode detector compares with its limit. The controller bounds each
// request's share, so a huge count cannot wrap the sum and make a full
// endpoint look empty (the session clamps max_tokens too; the controller does
// not rely on it).
TEST(Capacity, HugeTokenCountsCannotWrapAnEndpointsInFlightTokens) {
  const TimePoint t0 = TimePoint{} + 1s;
  std::vector<Decision> decisions;
  Controller c(limits(0, 0),
               std::make_unique<ConcurrencyDetector>(ConcurrencyParams{true, 100, 1000, 0}),
               [&](const Decision& d) { decisions.push_back(d); });
  c.set_endpoint_count(1);
  auto enqueue = [&](std::uint64_t cookie, std::uint64_t in, std::uint64_t out) {
    EnqueueRequest e;
    e.cookie = cookie;
    e.flow_id = "tenant";
    e.received = t0;
    e.input_tokens = in;
    e.max_output_tokens = out;
    return c.enqueue(e, t0);
  };
  enqueue(1, 10, UINT64_MAX - 5);
  c.dispatch(t0);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].outcome, QueueOutcome::kDispatched);
  EXPECT_GE(c.endpoint_load()[0].in_flight_tokens, 1000u);  // full, not wrapped to 4
  enqueue(2, 100, 100);
  enqueue(3, UINT64_MAX, 0);
  c.dispatch(t0);
  EXPECT_EQ(decisions.size(), 1u);  // both wait: the endpoint is full
  c.complete(decisions[0].ticket, 16, t0 + 1s);
  c.dispatch(t0 + 1s);
  // The 200-token one goes, then the huge prompt (room: 200 < 1000), which
  // fills the endpoint at a bounded count.
  ASSERT_EQ(decisions.size(), 3u);
  EXPECT_EQ(decisions[1].cookie, 2u);
  EXPECT_EQ(decisions[2].cookie, 3u);
  EXPECT_GE(c.endpoint_load()[0].in_flight_tokens, 1000u);
  EXPECT_LT(c.endpoint_load()[0].in_flight_tokens, UINT64_MAX / 2);
  c.complete(decisions[1].ticket, 100, t0 + 2s);
  c.complete(decisions[2].ticket, 0, t0 + 2s);
  EXPECT_EQ(c.endpoint_load()[0].in_flight_tokens, 0u);  // every share given back exactly
}

}  // namespace
}  // namespace sluice::sim
