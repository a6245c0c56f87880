// Quotas across a fleet (issue 41, item 3): the lease round's Lua script
// in a real redis-server, driven by ledgers on a fake clock (the script
// takes its time from the replica, so windows and lease expiry are
// deterministic here). Three replicas spread one tenant 70/20/10 at twice
// its limit and never spend more than it in any window; a lease of a
// replica that stops returns after redis.lease; a Redis restart loses no
// spend (each replica writes its own again); a key of the wrong type or a
// reply out of shape fails that limit's lease, never the process; Redis
// gone for a lease puts the ledger in quota.failMode.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "fleet/quota_leases.h"
#include "support/redis_server.h"
#include "support/requires.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using quota::FleetMode;
using quota::Ledger;
using quota::LimitDef;
using quota::Millis;
using quota::Usage;
using test::RedisServer;
using test::TempDir;

constexpr Millis kT0 = 1'796'601'600'000;  // 2026-12-07T00:00:00Z
Millis g_now = kT0;
Millis fake_now() { return g_now; }

LimitDef tokens(std::uint64_t amount, Millis window = 60'000) {
  LimitDef d;
  d.name = "tpm";
  d.measure = quota::Measure::kTokens;
  d.amount = amount;
  d.period.window = window;
  return d;
}

// A replica: its ledger, its own connection and lease round.
struct Replica {
  Ledger ledger{fake_now};
  RedisConnection redis;
  std::unique_ptr<QuotaLeases> leases;
  Replica(const std::string& id, const std::string& socket,
          QuotaFailMode mode = QuotaFailMode::kLocal, std::chrono::milliseconds lease = 2s)
      : redis([&] {
          RedisAddress a;
          a.unix_socket = socket;
          a.timeout = 200ms;
          return a;
        }()) {
    QuotaLeaseOptions o;
    o.prefix = "t";
    o.writer = id + "/inc1";
    o.lease = lease;
    o.interval = 0ms;  // every call a round
    o.fail_mode = mode;
    leases = std::make_unique<QuotaLeases>(o, ledger);
    ledger.set_fleet_mode(FleetMode::kLeased, 3);
  }
  void configure(const LimitDef& d) { ASSERT_TRUE(ledger.set_owner("t:acme", {d})); }
  void round() { leases->round(redis, 3, true); }
  // Reserves `n` tokens (input only, no output) and settles it at once to
  // what it reserved: true if admitted.
  quota::Ledger::Admit try_spend(std::uint64_t n) {
    auto owner = ledger.find("t:acme");
    Usage u{n, 0};
    auto a = ledger.reserve({owner.get()}, "m", u, {}, g_now);
    if (!a.refused) {
      a.reservation.dispatched();
      a.reservation.used(u);
      a.reservation.settle(g_now);
    }
    return a;
  }
  quota::Limit::Snapshot snap() { return (*ledger.find("t:acme"))[0]->snapshot(g_now); }
};

class QuotaLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE(test::redis_server_bin(), "redis-server", ::sluice::test::kRedisPackage);
    signal(SIGPIPE, SIG_IGN);
    g_now = kT0;
    server_ = std::make_unique<RedisServer>(dir_.path);
    ASSERT_TRUE(server_->start());
  }
  RedisConnection admin() {
    RedisAddress a;
    a.unix_socket = server_->socket();
    return RedisConnection(a);
  }
  TempDir dir_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(QuotaLeaseTest, AFirstRequestWaitsForItsLeaseThenFits) {
  Replica r("a", server_->socket());
  r.configure(tokens(1000));
  auto first = r.try_spend(100);
  ASSERT_TRUE(first.refused);
  EXPECT_TRUE(first.refused->lease_short);
  EXPECT_EQ(r.snap().lease_waits, 1u);
  r.round();  // asks for what waited
  EXPECT_EQ(r.leases->status().failures, 0u) << r.leases->status().last_error;
  EXPECT_GE(r.snap().lease, 100u);
  EXPECT_FALSE(r.try_spend(100).refused);
  // Redis holds this replica's spend and lease.
  r.round();
  auto a = admin();
  auto v = a.pipeline({{"HGETALL", "t:q:t:acme:tpm:60000ms"}});
  ASSERT_TRUE(v);
  std::uint64_t spend = 0;
  bool lease = false;
  for (std::size_t i = 0; i + 1 < (*v)[0].elements.size(); i += 2) {
    const auto& f = (*v)[0].elements[i].str;
    if (f.rfind("b:", 0) == 0) spend += std::stoull((*v)[0].elements[i + 1].str);
    if (f == "l:a/inc1") lease = true;
  }
  EXPECT_EQ(spend, 100u);
  EXPECT_TRUE(lease);
}

// One tenant, 1000 tokens a minute, at twice that spread 70/20/10 over
// three replicas, leases every 100 ms of fake time for five minutes: in
// every minute-long window the fleet spends at most the limit (oracle:
// the settled spend by 100 ms step, summed over each trailing minute), and
// in each clock minute after the first at least 97% of it (the issue's
// target).
TEST_F(QuotaLeaseTest, ThreeReplicasSpreadSeventyTwentyTenNeverExceedTheLimit) {
  std::vector<std::unique_ptr<Replica>> rs;
  for (const char* id : {"a", "b", "c"}) {
    rs.push_back(std::make_unique<Replica>(id, server_->socket()));
    rs.back()->configure(tokens(1000));
  }
  const double share[3] = {0.7, 0.2, 0.1};
  constexpr int kSteps = 3000;  // 100 ms each
  std::vector<std::uint64_t> spent(kSteps, 0);
  double owed[3] = {0, 0, 0};
  for (int step = 0; step < kSteps; ++step) {
    g_now = kT0 + step * 100;
    for (int i = 0; i < 3; ++i) {
      // 2000 tokens a minute: 3.33 per step in all, in requests of 1 token.
      owed[i] += 2000.0 / 600 * share[i];
      while (owed[i] >= 1) {
        owed[i] -= 1;
        if (!rs[i]->try_spend(1).refused) spent[step] += 1;
      }
      rs[i]->round();
    }
  }
  std::uint64_t window = 0, worst = 0, least = UINT64_MAX;
  for (int step = 0; step < kSteps; ++step) {
    window += spent[step];
    if (step >= 600) window -= spent[step - 600];
    worst = std::max(worst, window);
    if (step >= 1200) least = std::min(least, window);
  }
  // Served per minute (0-1, 1-2, ...: the bench's windows), after the first.
  std::uint64_t least_minute = UINT64_MAX;
  for (int m = 1; m < kSteps / 600; ++m) {
    std::uint64_t sum = 0;
    for (int step = m * 600; step < (m + 1) * 600; ++step) sum += spent[step];
    least_minute = std::min(least_minute, sum);
  }
  for (auto& r : rs) EXPECT_EQ(r->leases->status().failures, 0u) << r->leases->status().last_error;
  RecordProperty("most_in_a_minute", static_cast<int>(worst));
  RecordProperty("least_in_a_trailing_minute", static_cast<int>(least));
  RecordProperty("least_in_a_clock_minute", static_cast<int>(least_minute));
  EXPECT_LE(worst, 1000u);
  // A trailing minute may see less: a sliding window of 64 buckets counts
  // spend for up to two buckets (3%) longer than the true window.
  EXPECT_GE(least, 940u);
  EXPECT_GE(least_minute, 970u) << "under 97% of the limit served in a minute of steady demand";
}

// A replica that stops syncing holds its lease until it expires (fake
// time past redis.lease), then the others may have it.
TEST_F(QuotaLeaseTest, AStoppedReplicasLeaseReturnsAfterTheLease) {
  Replica a("a", server_->socket()), b("b", server_->socket());
  a.configure(tokens(1000));
  b.configure(tokens(1000));
  // a wants 800 (waited-for demand) and its largest request (100) more,
  // and gets it.
  for (int i = 0; i < 8; ++i) a.try_spend(100);
  a.round();
  EXPECT_EQ(a.snap().lease, 900u);
  // b wants 500: only 100 is left.
  for (int i = 0; i < 4; ++i) b.try_spend(100);
  b.round();
  EXPECT_EQ(b.snap().lease, 100u);
  // a stops; after its lease (2 s of fake time), b may have the rest.
  g_now += 2001;
  for (int i = 0; i < 4; ++i) b.try_spend(100);
  b.round();
  EXPECT_GE(b.snap().lease, 400u);
}

// Redis restarts empty: each replica's next round writes its own spend
// again (absolute numbers per replica and incarnation), so the window
// still holds what was spent before; nothing is counted twice.
TEST_F(QuotaLeaseTest, ARedisRestartLosesNoSpendAndCountsNoneTwice) {
  Replica a("a", server_->socket()), b("b", server_->socket());
  a.configure(tokens(1000));
  b.configure(tokens(1000));
  a.try_spend(300);
  a.round();
  ASSERT_FALSE(a.try_spend(300).refused);
  a.round();
  a.round();
  b.try_spend(100);
  b.round();
  EXPECT_EQ(b.snap().used, 300u) << "b sees a's spend";
  auto adm = admin();
  ASSERT_TRUE(adm.pipeline({{"FLUSHALL"}}));
  a.round();
  b.round();
  EXPECT_EQ(b.snap().used, 300u) << "after the flush a wrote its spend again, once";
  // A replica restarted (a new incarnation) does not overwrite what its
  // predecessor spent.
  Replica a2("a", server_->socket());
  a2.leases = std::make_unique<QuotaLeases>(
      [] {
        QuotaLeaseOptions o;
        o.prefix = "t";
        o.writer = "a/inc2";
        o.interval = 0ms;
        return o;
      }(),
      a2.ledger);
  a2.configure(tokens(1000));
  a2.try_spend(50);
  a2.round();
  EXPECT_EQ(a2.snap().used, 300u);
}

// Redis SIGKILLed and restarted mid-window with its append-only file: the
// spend is there before any replica writes again; and a replica that
// never comes back (its spend stays, its lease runs out) costs the others
// nothing after redis.lease.
TEST_F(QuotaLeaseTest, ARedisWithAppendOnlyKeepsTheSpendAndADeadReplicasLeaseReturns) {
  server_.reset();
  server_ = std::make_unique<RedisServer>(dir_.path, "", true);
  ASSERT_TRUE(server_->start());
  auto a = std::make_unique<Replica>("a", server_->socket());
  Replica b("b", server_->socket());
  a->configure(tokens(1000));
  b.configure(tokens(1000));
  for (int i = 0; i < 6; ++i) a->try_spend(100);  // waits: a asks for 600 and more
  a->round();
  ASSERT_FALSE(a->try_spend(400).refused);
  a->round();
  server_->kill();
  server_ = std::make_unique<RedisServer>(dir_.path, "", true);
  ASSERT_TRUE(server_->start());
  a.reset();  // SIGKILLed with Redis: never syncs again
  b.try_spend(100);
  b.round();
  EXPECT_EQ(b.snap().used, 400u) << "a's spend, read back from the append-only file";
  EXPECT_EQ(b.snap().lease, 0u) << "a's lease still holds the rest";
  g_now += 2001;  // a's lease runs out
  b.try_spend(100);
  b.round();
  EXPECT_GE(b.snap().lease, 100u);
  EXPECT_FALSE(b.try_spend(100).refused);
}

// An operator's reset (applied on every replica: the admin API sends it
// to the others) drops every replica's spend of the limit from Redis, and
// each replica's own: the window counts nothing after the next rounds.
TEST_F(QuotaLeaseTest, AResetDropsTheFleetsSpend) {
  Replica a("a", server_->socket()), b("b", server_->socket());
  a.configure(tokens(1000));
  b.configure(tokens(1000));
  a.try_spend(300);
  a.round();
  ASSERT_FALSE(a.try_spend(300).refused);
  b.try_spend(100);
  b.round();
  ASSERT_FALSE(b.try_spend(100).refused);
  a.round();
  b.round();
  ASSERT_EQ(b.snap().used, 400u);
  // Another replica's reset, sent on (and stored: a replica that starts
  // applies it again) empties only that replica's own books.
  b.ledger.reset((*b.ledger.find("t:acme"))[0], false);
  b.round();
  a.round();
  b.round();
  EXPECT_EQ(b.snap().used, 300u) << "a's spend stays; b's own went";
  b.try_spend(100);
  // The operator's, on every replica (made on a, sent on to b).
  a.ledger.reset((*a.ledger.find("t:acme"))[0]);
  b.ledger.reset((*b.ledger.find("t:acme"))[0], false);
  a.round();
  b.round();
  a.round();
  EXPECT_EQ(a.snap().used, 0u);
  EXPECT_EQ(b.snap().used, 0u);
  // Spend after the reset counts again, once.
  ASSERT_FALSE(a.try_spend(a.snap().lease).refused);
  a.round();
  b.round();
  EXPECT_EQ(b.snap().used, a.snap().used);
}

// A reply out of shape fails that limit's lease (no crash, counted); a
// key of another type (an operator's) is Redis's WRONGTYPE, the same.
TEST_F(QuotaLeaseTest, AKeyOfTheWrongTypeFailsThatLeaseOnly) {
  auto adm = admin();
  ASSERT_TRUE(adm.pipeline({{"SET", "t:q:t:acme:tpm:60000ms", "x"}}));
  Replica r("a", server_->socket());
  r.configure(tokens(1000));
  r.try_spend(10);
  r.round();
  EXPECT_EQ(r.leases->status().failures, 1u);
  EXPECT_NE(r.leases->status().last_error.find("WRONGTYPE"), std::string::npos)
      << r.leases->status().last_error;
  EXPECT_EQ(r.snap().lease, 0u);
  EXPECT_TRUE(r.try_spend(10).refused);
}

TEST(QuotaLeaseReply, OutOfShapeIsRefused) {
  quota::LeaseAsk ask;
  ask.now = 100'000;
  ask.want = 100;
  ask.bucket_width = 1000;
  ask.buckets = 61;
  auto integer = [](long long v) {
    RedisReply r;
    r.type = RedisReply::Type::kInteger;
    r.integer = v;
    return r;
  };
  auto array = [](std::vector<RedisReply> e) {
    RedisReply r;
    r.type = RedisReply::Type::kArray;
    r.elements = std::move(e);
    return r;
  };
  EXPECT_TRUE(
      parse_lease_reply(array({integer(50), integer(10), integer(0), integer(50)}), ask, 1));
  RedisReply str;
  str.type = RedisReply::Type::kString;
  str.str = "50";
  for (const auto& bad :
       {array({integer(50), integer(10), integer(0)}),
        array({integer(50), integer(10), integer(0), integer(5), integer(1)}),
        array({str, integer(10), integer(0), integer(5)}),
        array({integer(101), integer(10), integer(0), integer(5)}),
        array({integer(-1), integer(10), integer(0), integer(5)}),
        array({integer(1), integer(-10), integer(0), integer(5)}),
        array({integer(1), integer(10), integer(0), integer(-2)}),
        // a bucket that is not the window's (a Retry-After of years)
        array({integer(1), integer(10), integer(0), integer(1'000'000'000)}),
        array({integer(1), integer(10), integer(0), integer(1)}), str, RedisReply{}})
    EXPECT_FALSE(parse_lease_reply(bad, ask, 1));
}

// Redis gone for a lease: the ledger holds each replica to its share
// (local), to the whole limit on its own spend (open), or refuses (closed);
// back, the replica writes its spend again and leases anew.
TEST_F(QuotaLeaseTest, RedisGoneForALeaseAppliesTheFailMode) {
  for (auto mode : {QuotaFailMode::kLocal, QuotaFailMode::kOpen, QuotaFailMode::kClosed}) {
    SCOPED_TRACE(static_cast<int>(mode));
    if (!server_) {
      server_ = std::make_unique<RedisServer>(dir_.path);
      ASSERT_TRUE(server_->start());
    }
    Replica r("a", server_->socket(), mode, 300ms);
    r.configure(tokens(900));
    r.try_spend(100);
    r.round();
    ASSERT_FALSE(r.try_spend(100).refused);
    r.round();
    EXPECT_EQ(r.ledger.fleet_mode(), FleetMode::kLeased);
    server_->kill();
    server_.reset();
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (!r.leases->status().degraded && std::chrono::steady_clock::now() < deadline) {
      r.try_spend(1);
      r.round();
      poll(nullptr, 0, 20);
    }
    ASSERT_TRUE(r.leases->status().degraded);
    switch (mode) {
      case QuotaFailMode::kLocal:
        // 900 / 3 replicas = 300, of which this replica spent 100 + a few.
        EXPECT_EQ(r.ledger.fleet_mode(), FleetMode::kLocal);
        EXPECT_FALSE(r.try_spend(150).refused);
        EXPECT_TRUE(r.try_spend(100).refused);
        break;
      case QuotaFailMode::kOpen:
        EXPECT_EQ(r.ledger.fleet_mode(), FleetMode::kOpen);
        EXPECT_FALSE(r.try_spend(600).refused);
        EXPECT_TRUE(r.try_spend(200).refused);
        break;
      case QuotaFailMode::kClosed: {
        EXPECT_EQ(r.ledger.fleet_mode(), FleetMode::kClosed);
        auto a = r.try_spend(1);
        ASSERT_TRUE(a.refused);
        EXPECT_TRUE(a.refused->unavailable);
        break;
      }
    }
    // Back: leased again, this replica's spend written again.
    server_ = std::make_unique<RedisServer>(dir_.path);
    ASSERT_TRUE(server_->start());
    r.round();
    EXPECT_EQ(r.ledger.fleet_mode(), FleetMode::kLeased) << r.leases->status().last_error;
    Replica other("b", server_->socket());
    other.configure(tokens(900));
    other.try_spend(1);
    other.round();
    EXPECT_EQ(other.snap().used, r.snap().used);
    EXPECT_GE(other.snap().used, 100u);
    auto adm = admin();
    ASSERT_TRUE(adm.pipeline({{"FLUSHALL"}}));
  }
}

}  // namespace
}  // namespace sluice::fleet
