// flowControl.headroom: room kept for the protected bands, lent while they
// are idle, and over-admission for the top band. Both sides of the trade
// are measured on a fake clock: the protected band's wait under a flood,
// and the lower band's throughput with no protected traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim.h"

namespace sluice::sim {
namespace {

const TimePoint T0{};

ControllerConfig two_bands(HeadroomConfig h = {}) {
  auto c = config_with("round-robin-fairness-policy", {rr_band(100), rr_band(-10)});
  c.headroom = h;
  return c;
}

HeadroomConfig reserve(std::uint32_t n, bool lend) {
  HeadroomConfig h;
  h.enabled = true;
  h.protected_priority = 100;
  h.reserve = n;
  h.lend = lend;
  return h;
}

struct Waits {
  double mean_ms = 0, p99_ms = 0;
};

Waits waits(const Sim& sim, const std::string& flow, TimePoint from) {
  std::vector<double> w;
  for (const auto& r : sim.records())
    if (r.request.flow == flow && r.arrived >= from && r.outcome == QueueOutcome::kDispatched)
      w.push_back(std::chrono::duration<double, std::milli>(r.decided - r.arrived).count());
  Waits out;
  if (w.empty()) return out;
  std::sort(w.begin(), w.end());
  for (double x : w) out.mean_ms += x / static_cast<double>(w.size());
  out.p99_ms = w[std::min(w.size() - 1, w.size() * 99 / 100)];
  return out;
}

std::size_t dispatched(const Sim& sim, const std::string& flow) {
  std::size_t n = 0;
  for (const auto& r : sim.records())
    n += r.request.flow == flow && r.outcome == QueueOutcome::kDispatched;
  return n;
}

// Four endpoints of 8 slots (~101 ms per request: ~317 req/s). Interactive
// Poisson at ~10% of capacity (32/s) beside a batch flood of 10x capacity;
// then batch alone.
PoolModel pool() {
  PoolModel p;
  p.endpoints = 4;
  p.slots_per_endpoint = 8;
  return p;
}

Waits interactive_under_flood(HeadroomConfig h) {
  Sim sim(two_bands(h), pool());
  sim.poisson({"interactive", 100}, 32, T0, T0 + 30s, 21);
  sim.poisson({"batch", -10}, 3200, T0, T0 + 30s, 22);
  sim.run_until(T0 + 31s);
  return waits(sim, "interactive", T0 + 2s);
}

std::size_t batch_alone(HeadroomConfig h) {
  Sim sim(two_bands(h), pool());
  sim.backlog({"batch", -10}, 64, T0, T0 + 20s);
  sim.run_until(T0 + 20s);
  return dispatched(sim, "batch");
}

// The reserve, lent while the protected band is idle: a flood cannot take
// the protected band's room while it is active, and batch alone keeps the
// whole pool. Targets (issue 12): protected wait under the flood near zero
// (mean <= 1 ms, from ~tens of ms without), batch alone >= 97% of the
// unprotected throughput. Held for good (lend: false) protects as well but
// costs batch the reserved share (here 2 of 8 slots: <= 80%).
TEST(Headroom, ReserveLentWhileIdleProtectsWithoutCostingThroughput) {
  const Waits none = interactive_under_flood({});
  const Waits lent = interactive_under_flood(reserve(2, true));
  const Waits held = interactive_under_flood(reserve(2, false));
  const double base = static_cast<double>(batch_alone({}));
  const double lent_batch = static_cast<double>(batch_alone(reserve(2, true)));
  const double held_batch = static_cast<double>(batch_alone(reserve(2, false)));
  std::printf("interactive wait mean/p99 ms: none %.2f/%.2f, lent %.2f/%.2f, held %.2f/%.2f\n",
              none.mean_ms, none.p99_ms, lent.mean_ms, lent.p99_ms, held.mean_ms, held.p99_ms);
  std::printf("batch alone: lent %.3f, held %.3f of unprotected (%.0f)\n", lent_batch / base,
              held_batch / base, base);
  EXPECT_GT(none.mean_ms, 5.0);
  EXPECT_LE(lent.mean_ms, 1.0);
  EXPECT_LE(held.mean_ms, 1.0);
  EXPECT_GE(lent_batch / base, 0.97);
  EXPECT_LE(held_batch / base, 0.80);
}

// Without a reserve the top band may go over the detector's limit by a few
// requests per endpoint: it never waits for a completion while its own
// load fits in that allowance, and the pool never holds more than
// slots + allowance per endpoint.
TEST(Headroom, OverAdmissionLetsTheTopBandInAtOnce) {
  HeadroomConfig h;
  h.enabled = true;
  h.protected_priority = 100;
  h.over_admission = 3;
  Sim sim(two_bands(h), pool());
  sim.poisson({"interactive", 100}, 32, T0, T0 + 30s, 21);
  sim.poisson({"batch", -10}, 3200, T0, T0 + 30s, 22);
  sim.run_until(T0 + 31s);
  const Waits w = waits(sim, "interactive", T0 + 2s);
  std::uint32_t peak_batch = 0, peak_any = 0;
  for (const auto& r : sim.records()) {
    if (r.outcome != QueueOutcome::kDispatched) continue;
    peak_any = std::max(peak_any, r.in_flight_after);
    if (r.request.priority < 100) peak_batch = std::max(peak_batch, r.in_flight_after);
  }
  std::printf("over-admission 3: interactive wait mean %.3f p99 %.3f ms\n", w.mean_ms, w.p99_ms);
  EXPECT_LE(w.mean_ms, 1.0);
  EXPECT_EQ(peak_batch, 8u);     // batch never past the detector
  EXPECT_LE(peak_any, 8u + 3u);  // the top band at most 3 past it
}

// Pool scope: the pool as a whole keeps `reserve` requests' room for the
// protected band (here 5 of 32), wherever it is.
TEST(Headroom, PoolScopeKeepsTheReserveAcrossThePool) {
  HeadroomConfig h = reserve(5, false);
  h.pool_scope = true;
  Sim sim(two_bands(h), pool());
  sim.backlog({"batch", -10}, 64, T0, T0 + 5s);
  sim.run_until(T0 + 6s);
  // In flight across the pool never above 32 - 5.
  std::vector<std::pair<TimePoint, int>> edges;
  for (const auto& r : sim.records()) {
    if (r.outcome != QueueOutcome::kDispatched) continue;
    edges.push_back({r.decided, +1});
    if (r.finished != TimePoint{}) edges.push_back({r.finished, -1});
  }
  std::sort(edges.begin(), edges.end());  // a completion (-1) first at equal times
  int now = 0, peak = 0;
  for (const auto& [t, d] : edges) peak = std::max(peak, now += d);
  EXPECT_EQ(peak, 27);
}

// reserveEndpoints: the pool's last endpoint takes no batch request while
// the interactive band is active, so an interactive request lands on an
// engine that runs none of the flood (no batch step to wait for in a real
// engine); batch alone gets it back (lent after the idle time), and the
// lane never takes the only endpoint left.
TEST(Headroom, ReservedEndpointsTakeNoLowerBandWhileHeld) {
  HeadroomConfig h;
  h.enabled = true;
  h.protected_priority = 100;
  h.reserve_endpoints = 1;
  h.lend_after_idle = 1s;
  Sim sim(two_bands(h), pool());
  sim.poisson({"interactive", 100}, 32, T0, T0 + 30s, 21);
  sim.poisson({"batch", -10}, 3200, T0, T0 + 30s, 22);
  sim.run_until(T0 + 31s);
  std::size_t batch_on_lane = 0, batch_elsewhere = 0, interactive_on_lane = 0, interactive = 0;
  for (const auto& r : sim.records()) {
    if (r.outcome != QueueOutcome::kDispatched || r.decided < T0 + 1s) continue;
    if (r.request.priority < 100) {
      (r.endpoint == 3 ? batch_on_lane : batch_elsewhere) += 1;
    } else {
      interactive += 1;
      interactive_on_lane += r.endpoint == 3;
    }
  }
  const Waits w = waits(sim, "interactive", T0 + 2s);
  std::printf("lane: batch on it %zu (elsewhere %zu), interactive on it %zu of %zu, wait %.3f ms\n",
              batch_on_lane, batch_elsewhere, interactive_on_lane, interactive, w.mean_ms);
  EXPECT_EQ(batch_on_lane, 0u);
  EXPECT_GT(batch_elsewhere, 1000u);
  EXPECT_GT(interactive, 800u);
  EXPECT_GE(interactive_on_lane, interactive * 95 / 100);
  EXPECT_LE(w.mean_ms, 1.0);

  // Batch alone: the lane is lent (nothing protected ever arrived).
  const double base = static_cast<double>(batch_alone({}));
  EXPECT_GE(static_cast<double>(batch_alone(h)) / base, 0.97);

  // One endpoint in the pool: the lane never takes it.
  PoolModel one = pool();
  one.endpoints = 1;
  h.lend = false;
  Sim single(two_bands(h), one);
  single.backlog({"batch", -10}, 16, T0, T0 + 2s);
  single.run_until(T0 + 2s);
  EXPECT_GT(dispatched(single, "batch"), 100u);
}

}  // namespace
// A lower band's anti-starvation share that comes due while the reserved
// endpoints are the only ones with room: the share finds no room for its
// batch request, and the interactive request behind it must still go to
// its reserved endpoint in the same pass (a due share that cannot be
// served does not stop the pass). Found by make demo: with the share
// stopping the pass, every interactive arrival waited for a batch
// completion (queue_ms up to ~1 s in the demo's access log).
TEST(Headroom, ADueShareWithoutRoomDoesNotHoldTheProtectedBand) {
  HeadroomConfig h;
  h.enabled = true;
  h.protected_priority = 100;
  h.reserve_endpoints = 2;
  h.lend_after_idle = 5s;
  auto c = two_bands(h);
  for (auto& b : c.registry.bands)
    if (b.priority < 100) b.share = 0.05;
  PoolModel p = pool();
  p.endpoints = 3;
  Sim sim(c, p);
  sim.poisson({"interactive", 100}, 32, T0, T0 + 30s, 21);
  sim.poisson({"batch", -10}, 3200, T0, T0 + 30s, 22);
  sim.run_until(T0 + 31s);
  const Waits w = waits(sim, "interactive", T0 + 2s);
  std::printf("interactive wait beside a due batch share: mean %.3f ms, p99 %.3f ms\n", w.mean_ms,
              w.p99_ms);
  EXPECT_GT(dispatched(sim, "interactive"), 800u);
  EXPECT_LE(w.mean_ms, 1.0);
  EXPECT_LE(w.p99_ms, 5.0);
  // The share still serves batch: its flood is dispatched on the third
  // endpoint all along.
  EXPECT_GT(dispatched(sim, "batch"), 1000u);
}

}  // namespace sluice::sim
