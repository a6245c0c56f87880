// The fleet's sync thread against a real redis-server: two or three
// replicas (FleetSync objects, each with a scripted stand-in for its
// dispatcher) see each other's endpoint work, backlog and queued demand,
// get each other's service exactly once, lose a replica whose lease ran
// out or that left, fall back to local accounting when Redis is killed and
// come back when it restarts, without charging any service twice.
#include "fleet/fleet_sync.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using flowcontrol::FleetInbound;
using flowcontrol::FleetOutbound;
using test::RedisServer;
using test::TempDir;

// A replica: what its dispatcher hands out at the next exchange, and every
// view it was given.
struct Replica {
  FleetOutbound next;  // service is handed out once, then cleared
  std::vector<FleetInbound> views;
  std::unique_ptr<FleetSync> sync;

  Replica(const std::string& id, const std::string& socket, std::chrono::milliseconds lease = 2s,
          const std::string& password = "") {
    FleetOptions o;
    o.redis.unix_socket = socket;
    o.redis.password = password;
    o.redis.timeout = 200ms;
    o.prefix = "test";
    o.replica_id = id;
    o.advertise = id + ".example:8080";
    o.interval = 10ms;
    o.lease = lease;
    sync = std::make_unique<FleetSync>(o, [this](const FleetInbound& in, FleetOutbound& out) {
      views.push_back(in);
      out = next;
      next.service.clear();
      return true;
    });
  }
  const FleetInbound& last() const { return views.back(); }
  double service_for(const std::string& key) const {
    double sum = 0;
    for (const auto& v : views)
      for (const auto& [k, s] : v.service)
        if (k == key) sum += s;
    return sum;
  }
};

class FleetSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::redis_server_bin())
      GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
    signal(SIGPIPE, SIG_IGN);
  }
  // Runs `round` until `done` holds, at most 5 s (Redis expiring a key is
  // the only thing waited for; each round is a real sync).
  static bool until(const std::function<void()>& round, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      round();
      if (done()) return true;
      poll(nullptr, 0, 10);
    }
    return false;
  }
  TempDir dir_;
};

TEST_F(FleetSyncTest, ReplicasSeeEachOthersWorkBacklogAndServiceOnce) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket()), b("b", redis.socket());
  a.next.endpoints.push_back({"10.0.0.1:8000", 3, 1, 300});
  a.next.backlog.push_back({0, 50.0, true, 5, 0});
  a.next.backlog.push_back({-1, 0.0, false, 7, 0});
  a.next.queued = 12;
  a.next.service.push_back({"0 tenant-a", 100});
  b.next.endpoints.push_back({"10.0.0.1:8000", 2, 0, 200});
  b.next.backlog.push_back({0, 80.0, true, 2, 0});
  a.sync->sync_once();
  b.sync->sync_once();  // b finds a (new member: read at once)
  b.sync->sync_once();  // ... and hands its view to its dispatcher
  const FleetInbound& v = b.last();
  ASSERT_EQ(v.endpoints.size(), 1u);
  EXPECT_EQ(v.endpoints[0].address, "10.0.0.1:8000");
  EXPECT_EQ(v.endpoints[0].in_flight, 3u) << "a's work only, not b's own";
  EXPECT_EQ(v.endpoints[0].dispatched_since_scrape, 1u);
  EXPECT_EQ(v.endpoints[0].in_flight_tokens, 300u);
  ASSERT_EQ(v.backlog.size(), 2u);
  EXPECT_EQ(v.backlog[0].priority, -1);
  EXPECT_FALSE(v.backlog[0].has_counter) << "a band without a fleet-wide standing";
  EXPECT_EQ(v.backlog[0].queued, 7u);
  EXPECT_EQ(v.backlog[1].priority, 0);
  EXPECT_DOUBLE_EQ(v.backlog[1].min_counter, 50.0);
  EXPECT_EQ(v.backlog[1].queued, 5u);
  EXPECT_EQ(v.backlog[1].queued_before, 5u) << "a ranks before b";
  EXPECT_EQ(v.queued, 12u);
  EXPECT_DOUBLE_EQ(b.service_for("0 tenant-a"), 100);
  // More service on a: b gets the difference, once.
  a.next.service.push_back({"0 tenant-a", 50});
  a.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  EXPECT_DOUBLE_EQ(b.service_for("0 tenant-a"), 150);
  // a sees b.
  a.sync->sync_once();
  a.sync->sync_once();
  ASSERT_EQ(a.last().endpoints.size(), 1u);
  EXPECT_EQ(a.last().endpoints[0].in_flight, 2u);
  EXPECT_DOUBLE_EQ(a.service_for("0 tenant-a"), 0) << "its own service never comes back";
  const FleetStatus st = b.sync->status();
  EXPECT_TRUE(st.connected);
  EXPECT_FALSE(st.degraded);
  ASSERT_EQ(st.replicas.size(), 2u);
  EXPECT_EQ(st.replicas[1].id, "a");
  EXPECT_EQ(st.replicas[1].address, "a.example:8080");
}

TEST_F(FleetSyncTest, AReplicaThatStopsSyncingIsDroppedWhenItsLeaseRunsOut) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket(), 100ms), b("b", redis.socket(), 100ms);
  a.next.endpoints.push_back({"10.0.0.1:8000", 4, 0, 0});
  a.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  ASSERT_EQ(b.last().endpoints.size(), 1u);
  // a is "killed": it never syncs again (and never leaves).
  EXPECT_TRUE(
      until([&] { b.sync->sync_once(); },
            [&] { return b.last().endpoints.empty() && b.sync->status().replicas.size() == 1; }))
      << "a's work still counted after its lease";
}

TEST_F(FleetSyncTest, AReplicaThatStopsLeavesAtOnce) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket(), 60s), b("b", redis.socket(), 60s);
  a.next.endpoints.push_back({"10.0.0.1:8000", 4, 0, 0});
  a.sync->sync_once();
  b.sync->sync_once();
  a.sync->stop();
  b.sync->sync_once();
  b.sync->sync_once();
  EXPECT_TRUE(b.last().endpoints.empty()) << "a left: its keys are gone, not waiting for a lease";
  EXPECT_EQ(b.sync->status().replicas.size(), 1u);
}

TEST_F(FleetSyncTest, RedisKilledFallsBackToLocalThenReconvergesWithoutDoubleCharging) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket(), 200ms), b("b", redis.socket(), 200ms);
  a.next.endpoints.push_back({"10.0.0.1:8000", 4, 0, 0});
  a.next.service.push_back({"0 t", 10});
  a.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  ASSERT_EQ(b.last().endpoints.size(), 1u);
  ASSERT_DOUBLE_EQ(b.service_for("0 t"), 10);

  redis.kill();
  b.sync->sync_once();
  EXPECT_FALSE(b.sync->status().connected);
  EXPECT_GE(b.sync->status().failures, 1u);
  // Within a lease of the last read: the last view stays; past it: none.
  EXPECT_TRUE(until([&] { b.sync->sync_once(); },
                    [&] { return b.last().endpoints.empty() && b.sync->status().degraded; }))
      << "still counting a's work with Redis gone for a lease";

  RedisServer again(dir_.path);
  ASSERT_TRUE(again.start());
  // a rewrites its whole state on the new connection; b reads it again.
  EXPECT_TRUE(until(
      [&] {
        a.sync->sync_once();
        b.sync->sync_once();
      },
      [&] { return !b.last().endpoints.empty() && b.sync->status().connected; }));
  EXPECT_DOUBLE_EQ(b.service_for("0 t"), 10) << "service charged twice after the restart";
  EXPECT_GE(a.sync->status().reconnects, 1u);
}

TEST_F(FleetSyncTest, AWrongPasswordIsAFailureWithTheServersReason) {
  RedisServer redis(dir_.path, "right-password");
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket(), 2s, "wrong-password");
  a.sync->sync_once();
  const FleetStatus st = a.sync->status();
  EXPECT_FALSE(st.connected);
  EXPECT_TRUE(st.degraded);
  EXPECT_NE(st.last_error.find("WRONGPASS"), std::string::npos) << st.last_error;
  ASSERT_FALSE(a.views.empty());
  EXPECT_TRUE(a.last().endpoints.empty()) << "local accounting only";
}

}  // namespace
}  // namespace sluice::fleet
