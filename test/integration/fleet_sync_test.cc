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

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.h"
#include "support/requires.h"

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
  std::vector<std::string> logs;  // what it logged, warnings first marked "W "
  std::unique_ptr<FleetSync> sync;

  Replica(const std::string& id, const std::string& socket, std::chrono::milliseconds lease = 2s,
          const std::string& password = "", const std::function<void(FleetOptions&)>& tune = {}) {
    FleetOptions o;
    o.redis.unix_socket = socket;
    o.redis.password = password;
    o.redis.timeout = 200ms;
    o.prefix = "test";
    o.replica_id = id;
    o.advertise = id + ".example:8080";
    o.interval = 10ms;
    o.lease = lease;
    if (tune) tune(o);
    sync = std::make_unique<FleetSync>(
        o,
        [this](const FleetInbound& in, FleetOutbound& out) {
          views.push_back(in);
          out = next;
          next.service.clear();
          return true;
        },
        [this](bool warning, const std::string& message) {
          logs.push_back((warning ? "W " : "I ") + message);
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
    SLUICE_REQUIRE(test::redis_server_bin(), "redis-server", ::sluice::test::kRedisPackage);
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
  // The fields of a hash in Redis, sorted.
  static std::vector<std::string> fields(RedisConnection& redis, const std::string& key) {
    std::vector<std::string> out;
    auto r = redis.pipeline({{"HKEYS", key}});
    EXPECT_TRUE(r) << redis.error();
    if (r)
      for (const auto& e : (*r)[0].elements) out.push_back(e.str);
    std::sort(out.begin(), out.end());
    return out;
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

// A view is "advanced" only once every other replica in it has published
// since the last advanced one: a view that repeats a report (the other is
// slow to sync, or dead until its lease runs out) is not, so the dispatcher
// keeps the room it left the other (Controller::exchange_fleet).
TEST_F(FleetSyncTest, AViewIsAdvancedOnlyOnceEveryOtherReplicaPublishedAgain) {
  TempDir dir;
  RedisServer redis(dir.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket()), b("b", redis.socket());
  a.sync->sync_once();
  b.sync->sync_once();  // reads a (new: counts as published)
  b.sync->sync_once();  // hands that view over; reads a again, unchanged
  b.sync->sync_once();  // hands the repeat over
  ASSERT_EQ(b.views.size(), 3u);
  EXPECT_EQ(b.views[1].replicas, 1u);
  EXPECT_TRUE(b.views[1].advanced);
  EXPECT_EQ(b.views[2].replicas, 1u);
  EXPECT_FALSE(b.views[2].advanced);
  a.sync->sync_once();  // a publishes again
  b.sync->sync_once();  // hands a repeat over; reads a's new state
  b.sync->sync_once();  // hands that over
  ASSERT_EQ(b.views.size(), 5u);
  EXPECT_FALSE(b.views[3].advanced);
  EXPECT_TRUE(b.views[4].advanced);
}

TEST_F(FleetSyncTest, AReplicaThatStopsSyncingIsDroppedWhenItsLeaseRunsOut) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  // A lease of a second: no pause between the syncs below outlasts it;
  // the wait for it to run out is until()'s.
  Replica a("a", redis.socket(), 1s), b("b", redis.socket(), 1s);
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

// A replica's state left in Redis without an expiry (written by an operator,
// a script or a bug) whose seq never advances: counted while it may still be
// a live replica, then dropped a lease after it was last seen to advance,
// though its key never expires and its `at` looked fresh.
TEST_F(FleetSyncTest, AStateThatNeverAdvancesStopsCountingAfterALease) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  RedisAddress addr;
  addr.unix_socket = redis.socket();
  RedisConnection w(addr);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  ASSERT_TRUE(w.pipeline(
      {{"SADD", "test:replicas", "ghost"},
       {"HSET", "test:r:ghost", "inc", "0123456789abcdef", "seq", "7", "at", std::to_string(now_ms),
        "addr", "ghost:8080", "svc", "0", "q", "0", "e:10.0.0.1:8000", "8 0 0"}}));
  // A lease of a second: no pause between the first syncs outlasts it.
  Replica a("a", redis.socket(), 1s), b("b", redis.socket(), 1s);
  a.next.endpoints.push_back({"10.0.0.2:8000", 1, 0, 0});
  a.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  ASSERT_EQ(b.last().endpoints.size(), 2u) << "at first it may be a live replica";
  ASSERT_EQ(b.sync->status().replicas.size(), 3u);
  EXPECT_TRUE(until(
      [&] {
        a.sync->sync_once();
        b.sync->sync_once();
      },
      [&] { return b.last().endpoints.size() == 1 && b.sync->status().replicas.size() == 2; }))
      << "a state that never advances still holds the pool after its lease";
  EXPECT_EQ(b.last().endpoints[0].address, "10.0.0.2:8000") << "a, which syncs, still counts";
  auto r = w.pipeline({{"PTTL", "test:r:ghost"}, {"SISMEMBER", "test:replicas", "ghost"}});
  ASSERT_TRUE(r) << w.error();
  EXPECT_EQ((*r)[0].integer, -1) << "the key is still there, without expiry";
  EXPECT_EQ((*r)[1].integer, 0) << "its id is tidied from the member set";
}

// Two processes given one replicaId (a fixed id in a ConfigMap shared by a
// Deployment's pods): each overwrites the other's state and sees only
// itself, so both take the whole pool. Each notices within two of its own
// syncs once both have written (status and a warning), and the flag clears
// a lease after the other stopped writing.
TEST_F(FleetSyncTest, TwoProcessesWithOneReplicaIdNoticeEachOther) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("gw-0", redis.socket(), 300ms), b("gw-0", redis.socket(), 300ms);
  a.next.endpoints.push_back({"10.0.0.1:8000", 8, 0, 0});
  b.next.endpoints.push_back({"10.0.0.1:8000", 8, 0, 0});
  for (int i = 0; i < 2; ++i) {
    a.sync->sync_once();
    b.sync->sync_once();
  }
  EXPECT_TRUE(a.last().endpoints.empty()) << "the harm: a does not see b's work";
  for (Replica* r : {&a, &b}) {
    const FleetStatus st = r->sync->status();
    EXPECT_TRUE(st.duplicate_id);
    EXPECT_GE(st.duplicate_id_syncs, 1u);
    ASSERT_FALSE(r->logs.empty());
    EXPECT_EQ(r->logs[0].rfind("W ", 0), 0u) << r->logs[0];
    EXPECT_NE(r->logs[0].find("'gw-0'"), std::string::npos) << r->logs[0];
    EXPECT_NE(r->logs[0].find("replicaId"), std::string::npos) << r->logs[0];
  }
  // b is "killed": a's flag clears once a lease passes without another writer.
  EXPECT_TRUE(until([&] { a.sync->sync_once(); }, [&] { return !a.sync->status().duplicate_id; }));
  EXPECT_GE(a.sync->status().duplicate_id_syncs, 1u) << "the count stays";
  EXPECT_EQ(a.logs.back().rfind("I ", 0), 0u) << a.logs.back();
}

// A process restarted under its id (a StatefulSet pod's name, a fixed id in
// a script, hostname-1 in a container) finds its killed predecessor's state
// before the lease ran out: nobody writes after it, so no duplicate.
TEST_F(FleetSyncTest, ARestartUnderTheSameIdIsNotADuplicate) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica before("gw-0", redis.socket(), 60s);
  before.sync->sync_once();  // then "killed": never syncs again
  Replica after("gw-0", redis.socket(), 60s);
  for (int i = 0; i < 3; ++i) after.sync->sync_once();
  const FleetStatus st = after.sync->status();
  EXPECT_TRUE(st.connected);
  EXPECT_FALSE(st.duplicate_id);
  EXPECT_EQ(st.duplicate_id_syncs, 0u);
  EXPECT_TRUE(after.logs.empty()) << after.logs[0];
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
  // A lease of a second: no pause between the syncs below outlasts it;
  // the wait for it to run out is until()'s.
  Replica a("a", redis.socket(), 1s), b("b", redis.socket(), 1s);
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

// What another "replica" wrote is read without trust: malformed numbers,
// negative or non-finite service, oversized fields, junk operator changes
// and a version that goes backwards are ignored; the valid parts still
// count and nothing is applied twice.
TEST_F(FleetSyncTest, MalformedStateInRedisIsIgnoredAndTheValidPartsStillCount) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  RedisAddress addr;
  addr.unix_socket = redis.socket();
  RedisConnection w(addr);
  const std::string huge(100000, 'x');
  auto r = w.pipeline({
      {"SADD", "test:replicas", "evil", huge},
      {"HSET",
       "test:r:evil",
       "inc",
       "1",
       "svc",
       "1",
       "q",
       "not-a-number",
       "seq",
       "-3",
       "at",
       "99999999999999999999999",
       "b:abc",
       "1 2",
       "b:0",
       "5",
       "b:1",
       "3 nan",
       "b:2",
       "4 7",
       "e:10.0.0.1:8000",
       "1 2",
       "e:10.0.0.2:8000",
       "-1 -1 -1",
       "e:10.0.0.3:8000",
       "2 1 100",
       "e:" + huge,
       "1 1 1",
       huge,
       "1"},
      {"HSET", "test:s:evil", "0 ok", "10", "0 neg", "-5", "0 inf", "1e400", "0 nan", "nan",
       "0 text", "ten", huge, "1"},
      {"HSET", "test:ops", "/admin/v1/flows/x", "junk", "/admin/v1/bands/1",
       "7 other/1 PUT /admin/v1/bands/1\n{\"maxRequests\": 2}", huge, huge},
      {"SET", "test:opsver", "7"},
  });
  ASSERT_TRUE(r) << w.error();
  Replica b("b", redis.socket());
  std::vector<FleetOperation> applied;
  b.sync->set_operation_handler([&](const FleetOperation& op) { applied.push_back(op); });
  b.sync->sync_once();
  b.sync->sync_once();
  const FleetInbound& v = b.last();
  ASSERT_EQ(v.endpoints.size(), 1u) << "only the well-formed endpoint";
  EXPECT_EQ(v.endpoints[0].address, "10.0.0.3:8000");
  EXPECT_EQ(v.endpoints[0].in_flight, 2u);
  ASSERT_EQ(v.backlog.size(), 2u) << "b:1 (queued, no counter) and b:2";
  EXPECT_FALSE(v.backlog[0].has_counter);
  EXPECT_EQ(v.backlog[1].queued, 4u);
  EXPECT_DOUBLE_EQ(v.backlog[1].min_counter, 7);
  EXPECT_EQ(v.queued, 0u) << "q was not a number";
  EXPECT_DOUBLE_EQ(b.service_for("0 ok"), 10);
  for (const char* bad : {"0 neg", "0 inf", "0 nan", "0 text"})
    EXPECT_DOUBLE_EQ(b.service_for(bad), 0) << bad;
  ASSERT_EQ(applied.size(), 1u) << "the junk change is ignored";
  EXPECT_EQ(applied[0].target, "/admin/v1/bands/1");
  EXPECT_EQ(applied[0].body, "{\"maxRequests\": 2}");
  // The version goes backwards (Redis restarted empty): numbers start over,
  // and a change with a number seen before is applied again, once.
  ASSERT_TRUE(w.pipeline({{"SET", "test:opsver", "1"},
                          {"HSET", "test:ops", "/admin/v1/bands/1",
                           "1 other/2 PUT /admin/v1/bands/1\n{\"maxRequests\": 3}"}}));
  b.sync->sync_once();
  b.sync->sync_once();
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[1].body, "{\"maxRequests\": 3}");
  EXPECT_TRUE(b.sync->status().connected);
}

// With two others, the merge shows: endpoint work summed per address over
// both, queued requests summed, per band the queued summed (and those of
// replicas before this one in id order apart) and the smaller counter; a
// band without a counter anywhere has none.
TEST_F(FleetSyncTest, AViewSumsTheOthersWorkAndTakesTheSmallestCounterPerBand) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket()), b("b", redis.socket()), c("c", redis.socket());
  a.next.endpoints.push_back({"x:8000", 3, 1, 300});
  a.next.backlog.push_back({0, 50.0, true, 5, 0});
  a.next.backlog.push_back({5, 0.0, false, 2, 0});
  a.next.queued = 7;
  b.next.endpoints.push_back({"x:8000", 2, 0, 200});
  b.next.endpoints.push_back({"y:8000", 1, 0, 100});
  b.next.backlog.push_back({0, 20.0, true, 4, 0});
  b.next.queued = 4;
  a.sync->sync_once();
  b.sync->sync_once();
  c.sync->sync_once();
  c.sync->sync_once();
  const FleetInbound& v = c.last();
  EXPECT_EQ(v.replicas, 2u);
  EXPECT_EQ(v.rank, 2u);
  EXPECT_EQ(v.queued, 11u);
  EXPECT_EQ(v.queued_before, 11u) << "a and b rank before c";
  ASSERT_EQ(v.endpoints.size(), 2u);
  EXPECT_EQ(v.endpoints[0].address, "x:8000");
  EXPECT_EQ(v.endpoints[0].in_flight, 5u);
  EXPECT_EQ(v.endpoints[0].dispatched_since_scrape, 1u);
  EXPECT_EQ(v.endpoints[0].in_flight_tokens, 500u);
  EXPECT_EQ(v.endpoints[1].address, "y:8000");
  EXPECT_EQ(v.endpoints[1].in_flight, 1u);
  ASSERT_EQ(v.backlog.size(), 2u);
  EXPECT_EQ(v.backlog[0].priority, 0);
  EXPECT_EQ(v.backlog[0].queued, 9u);
  EXPECT_TRUE(v.backlog[0].has_counter);
  EXPECT_DOUBLE_EQ(v.backlog[0].min_counter, 20.0) << "b's, the smaller";
  EXPECT_EQ(v.backlog[1].priority, 5);
  EXPECT_EQ(v.backlog[1].queued, 2u);
  EXPECT_FALSE(v.backlog[1].has_counter);
  // b, between a and c: only a's demand is before it.
  b.sync->sync_once();
  b.sync->sync_once();
  EXPECT_EQ(b.last().rank, 1u);
  EXPECT_EQ(b.last().queued_before, 7u);
  ASSERT_FALSE(b.last().backlog.empty());
  EXPECT_EQ(b.last().backlog[0].queued_before, 5u);
  EXPECT_DOUBLE_EQ(b.last().backlog[0].min_counter, 50.0);
}

// A replica restarted under its id (killed, so it never left) begins a new
// service table: what it reports is charged from zero again, per
// incarnation, though its numbers are below those its predecessor reached.
TEST_F(FleetSyncTest, AReplicaRestartedUnderItsIdIsChargedFromZero) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  Replica b("b", redis.socket());
  Replica before("a", redis.socket());
  before.next.service.push_back({"0 t", 10});
  before.sync->sync_once();  // then "killed": never syncs again
  b.sync->sync_once();
  b.sync->sync_once();
  ASSERT_DOUBLE_EQ(b.service_for("0 t"), 10);
  Replica after("a", redis.socket());
  after.next.service.push_back({"0 t", 4});
  after.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  EXPECT_DOUBLE_EQ(b.service_for("0 t"), 14) << "the new incarnation's 4 is new service";
  after.next.service.push_back({"0 t", 1});
  after.sync->sync_once();
  b.sync->sync_once();
  b.sync->sync_once();
  EXPECT_DOUBLE_EQ(b.service_for("0 t"), 15) << "then only what grew";
}

// redis.maxReplicas (README, Limits): a replica reads the state of at most
// that many others, the first in id order (itself not among them); the
// rest count for nothing there: their work, their service, their place in
// the line. When one of those read leaves, the next in id order is read.
TEST_F(FleetSyncTest, AtMostMaxReplicasOthersAreReadTheFirstInIdOrder) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  std::map<std::string, std::unique_ptr<Replica>> others;
  for (const char* id : {"e", "a", "f", "b", "d"}) {  // joining out of id order
    auto r = std::make_unique<Replica>(id, redis.socket());
    r->next.endpoints.push_back({std::string(id) + ".pool:8000", 1, 0, 0});
    r->next.service.push_back({std::string("0 from-") + id, 10});
    r->sync->sync_once();
    others[id] = std::move(r);
  }
  Replica c("c", redis.socket(), 2s, "", [](FleetOptions& o) { o.max_replicas = 3; });
  c.sync->sync_once();
  c.sync->sync_once();
  auto addresses = [](const FleetInbound& v) {
    std::vector<std::string> out;
    for (const auto& e : v.endpoints) out.push_back(e.address);
    return out;
  };
  EXPECT_EQ(addresses(c.last()),
            (std::vector<std::string>{"a.pool:8000", "b.pool:8000", "d.pool:8000"}));
  EXPECT_EQ(c.last().replicas, 3u);
  EXPECT_EQ(c.last().rank, 2u) << "after a and b";
  for (const char* id : {"a", "b", "d"})
    EXPECT_DOUBLE_EQ(c.service_for(std::string("0 from-") + id), 10) << id;
  for (const char* id : {"e", "f"})
    EXPECT_DOUBLE_EQ(c.service_for(std::string("0 from-") + id), 0) << id << " was not read";
  std::vector<std::string> listed;
  for (const auto& r : c.sync->status().replicas) listed.push_back(r.id);
  EXPECT_EQ(listed, (std::vector<std::string>{"c", "a", "b", "d"})) << "itself, then those read";

  // b leaves: e is next in id order (f still is not read).
  others["b"]->sync->stop();
  for (auto* id : {"a", "d", "e", "f"}) others[id]->sync->sync_once();
  c.sync->sync_once();
  c.sync->sync_once();
  EXPECT_EQ(addresses(c.last()),
            (std::vector<std::string>{"a.pool:8000", "d.pool:8000", "e.pool:8000"}));
  EXPECT_DOUBLE_EQ(c.service_for("0 from-e"), 10);
  EXPECT_DOUBLE_EQ(c.service_for("0 from-f"), 0);
}

// The fleet service table (README, Limits: flowControl.maxFlows flows per
// replica, each kept 10 min unserved): past max_flows the least recently
// served flow leaves the table in Redis, not the first one added; the
// others stay (well within 10 min).
TEST_F(FleetSyncTest, AServiceTableKeepsTheMaxFlowsMostRecentlyServed) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  RedisAddress addr;
  addr.unix_socket = redis.socket();
  RedisConnection w(addr);
  Replica a("a", redis.socket(), 2s, "", [](FleetOptions& o) { o.max_flows = 5; });
  // One flow served per sync: each sync is a later "last served".
  auto serve = [&](const std::string& flow) {
    a.next.service.push_back({"0 " + flow, 1});
    a.sync->sync_once();
  };
  for (const char* f : {"f0", "f1", "f2", "f3", "f4"}) serve(f);
  EXPECT_EQ(fields(w, "test:s:a"),
            (std::vector<std::string>{"0 f0", "0 f1", "0 f2", "0 f3", "0 f4"}));
  serve("f0");  // served again: f1 is now the least recently served
  serve("f5");
  EXPECT_EQ(fields(w, "test:s:a"),
            (std::vector<std::string>{"0 f0", "0 f2", "0 f3", "0 f4", "0 f5"}));
  serve("f6");
  EXPECT_EQ(fields(w, "test:s:a"),
            (std::vector<std::string>{"0 f0", "0 f3", "0 f4", "0 f5", "0 f6"}));
  auto r = w.pipeline({{"HGET", "test:s:a", "0 f0"}});
  ASSERT_TRUE(r) << w.error();
  EXPECT_EQ((*r)[0].str, "2") << "f0's service, cumulative";
}

// ...and a flow unserved for the idle time (10 min by default, 20 ms here)
// leaves the table though it is below max_flows. The idle time passing is
// what is tested: the pause makes it pass, it waits for no other party.
TEST_F(FleetSyncTest, AFlowUnservedForTheIdleTimeLeavesTheServiceTable) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  RedisAddress addr;
  addr.unix_socket = redis.socket();
  RedisConnection w(addr);
  Replica a("a", redis.socket(), 2s, "", [](FleetOptions& o) {
    o.max_flows = 5;
    o.service_idle = 20ms;
  });
  a.next.service.push_back({"0 old", 1});
  a.sync->sync_once();
  ASSERT_EQ(fields(w, "test:s:a"), (std::vector<std::string>{"0 old"}));
  poll(nullptr, 0, 50);
  // The table is swept every 64 syncs (and whenever it is over max_flows):
  // "busy", served at every sync, stays.
  auto has_old = [&] {
    const auto f = fields(w, "test:s:a");
    return std::find(f.begin(), f.end(), "0 old") != f.end();
  };
  for (int i = 0; i < 70 && has_old(); ++i) {
    a.next.service.push_back({"0 busy", 1});
    a.sync->sync_once();
  }
  EXPECT_EQ(fields(w, "test:s:a"), (std::vector<std::string>{"0 busy"}));
}

// ...and another replica's table is read up to this replica's max_flows:
// of a table of 8 flows (its writer allows 8), a reader with 5 is charged
// for 5 of them, each once and whole.
TEST_F(FleetSyncTest, AnotherReplicasServiceTableIsReadUpToMaxFlows) {
  RedisServer redis(dir_.path);
  ASSERT_TRUE(redis.start());
  RedisAddress addr;
  addr.unix_socket = redis.socket();
  RedisConnection w(addr);
  Replica a("a", redis.socket(), 2s, "", [](FleetOptions& o) { o.max_flows = 8; });
  Replica b("b", redis.socket(), 2s, "", [](FleetOptions& o) { o.max_flows = 5; });
  for (int i = 0; i < 8; ++i) a.next.service.push_back({"0 f" + std::to_string(i), 10});
  a.sync->sync_once();
  ASSERT_EQ(fields(w, "test:s:a").size(), 8u);
  b.sync->sync_once();
  b.sync->sync_once();
  int charged = 0;
  for (int i = 0; i < 8; ++i) {
    const double s = b.service_for("0 f" + std::to_string(i));
    EXPECT_TRUE(s == 0 || s == 10) << "f" << i << ": " << s;
    charged += s == 10;
  }
  EXPECT_EQ(charged, 5);
}

// Redis wants a password this replica does not have: the sync's error and
// its log line name it (before: "Server closed the connection").
TEST_F(FleetSyncTest, AMissingPasswordIsAFailureNamingTheAuthentication) {
  RedisServer redis(dir_.path, "x");
  ASSERT_TRUE(redis.start());
  Replica a("a", redis.socket());
  a.sync->sync_once();
  const FleetStatus st = a.sync->status();
  EXPECT_FALSE(st.connected);
  EXPECT_TRUE(st.degraded);
  EXPECT_NE(st.last_error.find("NOAUTH"), std::string::npos) << st.last_error;
  EXPECT_NE(st.last_error.find("redis.passwordFile"), std::string::npos) << st.last_error;
  ASSERT_EQ(a.logs.size(), 1u);
  EXPECT_NE(a.logs[0].find("NOAUTH"), std::string::npos) << a.logs[0];
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
  EXPECT_NE(st.last_error.find("redis.passwordFile"), std::string::npos) << st.last_error;
  ASSERT_FALSE(a.views.empty());
  EXPECT_TRUE(a.last().endpoints.empty()) << "local accounting only";
}

}  // namespace
}  // namespace sluice::fleet
