// Controller::exchange_fleet when the other replicas' reports repeat: the
// room this replica left them stays theirs until they publish again (or
// leave the view). It used to be kept for one view only: a replica killed
// (or slow) between dispatching into that room and its next sync lost it on
// the second repeat, and the pool went one over its limit.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {
namespace {

using namespace std::chrono_literals;

struct Replica2 {
  std::vector<Decision> out;
  std::unique_ptr<Controller> c;
  const std::string addr = "127.0.0.1:9000";

  Replica2() {
    ControllerConfig cfg;
    cfg.registry.default_band.fairness = "vtc-fairness-policy";
    cfg.default_ttl.reset();
    c = std::make_unique<Controller>(
        cfg, std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 4, 1000000, 0}),
        [this](const Decision& d) { out.push_back(d); });
    c->set_endpoints({EndpointIdentity{addr}});
    FleetSettings s;
    s.enabled = true;
    s.fairness_slack = 64;
    s.max_hold = 10s;
    c->set_fleet(s);
  }
  // The other replica's last report: 3 of the 4 slots in flight, 1 queued.
  FleetInbound other(bool advanced) const {
    FleetInbound r;
    r.endpoints.push_back({addr, 3, 0, 603});
    r.backlog.push_back(FleetBandBacklog{0, 3.0, true, 1, 1});
    r.queued = 1;
    r.replicas = 1;
    r.rank = 1;
    r.queued_before = 1;
    r.advanced = advanced;
    return r;
  }
  std::uint32_t load() const { return c->endpoint_load()[0].in_flight; }
  // This replica's own request (flow b) arrives.
  void enqueue_b(TimePoint now) {
    EnqueueRequest e;
    e.cookie = 1;
    e.flow_id = "b";
    e.input_tokens = 10;
    e.max_output_tokens = 4;
    c->enqueue(e, now);
  }
};

TEST(FleetExchange, RoomLeftToAnotherReplicaStaysItsWhileItsReportRepeats) {
  Replica2 r;
  TimePoint now{};
  FleetOutbound o;
  // The one free slot is left to the other replica, which has demand for it.
  r.c->exchange_fleet(r.other(true), o, now);
  EXPECT_EQ(r.load(), 4u);
  r.enqueue_b(now);
  r.c->dispatch(now);
  EXPECT_TRUE(r.out.empty());
  // The same report again and again (the other is dead until its lease runs
  // out, or slow to sync): the slot stays its own.
  for (int view = 1; view <= 6; ++view) {
    now += 10ms;
    r.c->exchange_fleet(r.other(false), o, now);
    r.c->dispatch(now);
    EXPECT_EQ(r.load(), 4u) << "view " << view;
    EXPECT_TRUE(r.out.empty()) << "view " << view << ": dispatched into room left to the other";
  }
  // It leaves the view (its lease ran out): the slot is free.
  now += 10ms;
  r.c->exchange_fleet(FleetInbound{}, o, now);
  r.c->dispatch(now);
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].outcome, QueueOutcome::kDispatched);
}

// A report that moved frees what was left as before: counted once more (the
// report may have been written before the other used the room), then gone.
TEST(FleetExchange, ReportsThatMoveFreeTheRoomLeftAfterOneMoreView) {
  Replica2 r;
  TimePoint now{};
  FleetOutbound o;
  r.c->exchange_fleet(r.other(true), o, now);
  EXPECT_EQ(r.load(), 4u);
  // The other published again (it has not taken the slot yet).
  now += 10ms;
  FleetInbound idle = r.other(true);
  idle.backlog.clear();
  idle.queued = 0;
  idle.queued_before = 0;
  r.c->exchange_fleet(idle, o, now);
  EXPECT_EQ(r.load(), 4u);  // the slot left is counted this once more
  // And again: now the slot is free here.
  now += 10ms;
  r.c->exchange_fleet(idle, o, now);
  EXPECT_EQ(r.load(), 3u);
  r.enqueue_b(now);
  r.c->dispatch(now);
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].outcome, QueueOutcome::kDispatched);
}

}  // namespace
}  // namespace sluice::flowcontrol
