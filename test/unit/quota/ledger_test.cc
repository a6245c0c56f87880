// quota::Ledger on a fake clock: reserve all-or-nothing, settle to what was
// used for every way a request ends, tenant and key charged together,
// shadow limits, models, reloads, the owner table's bound, and threads.
#include "quota/ledger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace sluice::quota {
namespace {

constexpr Millis kT0 = 1'796'601'600'000;  // 2026-12-07T00:00:00Z
Millis g_now = kT0;
Millis fake_now() { return g_now; }

LimitDef tokens(std::string name, std::uint64_t amount, Millis window = 60'000) {
  LimitDef d;
  d.name = std::move(name);
  d.measure = Measure::kTokens;
  d.amount = amount;
  d.period.window = window;
  return d;
}

struct Books {
  Ledger ledger{fake_now};
  Books() { g_now = kT0; }
  const Limits* owner(const std::string& name) {
    auto p = ledger.find(name);
    keep.push_back(p);
    return p.get();
  }
  Limit::Snapshot snap(const std::string& name, std::size_t i = 0) {
    return (*ledger.find(name))[i]->snapshot(g_now);
  }
  std::vector<std::shared_ptr<const Limits>> keep;
};

TEST(QuotaLedger, AReservationHoldsItsWorstCaseAndSettlesToWhatWasUsed) {
  Books b;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 1000)}));
  auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {100, 500}, {}, g_now);
  ASSERT_FALSE(a.refused);
  EXPECT_EQ(b.snap("tenant:acme").held, 600u);
  EXPECT_EQ(a.headroom.tokens.remaining, 400u);
  EXPECT_EQ(a.headroom.tokens.limit, 1000u);
  a.reservation.dispatched();
  a.reservation.used({100, 37});
  g_now += 5;
  a.reservation.settle(g_now);
  EXPECT_TRUE(a.reservation.empty());
  const auto s = b.snap("tenant:acme");
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.used, 137u);
}

TEST(QuotaLedger, ARefusedRequestHoldsNothingAndSaysWhenItWouldFit) {
  Books b;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 1000)}));
  {
    auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 900}, {}, g_now);
    a.reservation.dispatched();
    a.reservation.used({0, 900});
  }  // settled by its destructor, at the fake clock's now
  EXPECT_EQ(b.snap("tenant:acme").used, 900u);
  auto r = b.ledger.reserve({b.owner("tenant:acme")}, "m", {50, 100}, {}, g_now);
  ASSERT_TRUE(r.refused);
  EXPECT_TRUE(r.reservation.empty());
  EXPECT_EQ(r.refused->owner, "tenant:acme");
  EXPECT_EQ(r.refused->limit.name, "tpm");
  EXPECT_FALSE(r.refused->insufficient);
  ASSERT_TRUE(r.refused->retry_after);
  EXPECT_GE(*r.refused->retry_after, 60'000);
  EXPECT_LT(*r.refused->retry_after, 60'000 + 2 * 938);
  const auto s = b.snap("tenant:acme");
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.used, 900u);
  EXPECT_EQ(s.refused, 1u);
  // OpenAI's headers on the 429 too: the limit as it stands.
  EXPECT_TRUE(r.headroom.tokens.present);
  EXPECT_EQ(r.headroom.tokens.limit, 1000u);
  EXPECT_EQ(r.headroom.tokens.remaining, 100u);
  // A request larger than the limit never fits: no Retry-After.
  auto big = b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 1001}, {}, g_now);
  ASSERT_TRUE(big.refused);
  EXPECT_FALSE(big.refused->retry_after);
  // When the window lets it, the same request goes.
  g_now += *r.refused->retry_after;
  auto later = b.ledger.reserve({b.owner("tenant:acme")}, "m", {50, 100}, {}, g_now);
  EXPECT_FALSE(later.refused);
}

TEST(QuotaLedger, ARequestThatNeverReachedAnEngineSpendsNothing) {
  Books b;
  LimitDef rpm = tokens("rpm", 2);
  rpm.measure = Measure::kRequests;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {rpm, tokens("tpm", 1000)}));
  {
    auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {10, 10}, {}, g_now);
    ASSERT_FALSE(a.refused);
    EXPECT_EQ(b.snap("tenant:acme", 0).held, 1u);
    a.reservation.used({10, 0});  // counted, but never dispatched (evicted from its queue)
  }
  EXPECT_EQ(b.snap("tenant:acme", 0).used, 0u);
  EXPECT_EQ(b.snap("tenant:acme", 0).held, 0u);
  EXPECT_EQ(b.snap("tenant:acme", 1).used, 0u);
  {  // cancelled mid-stream: what was produced before the cancel
    auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {10, 300}, {}, g_now);
    a.reservation.dispatched();
    a.reservation.used({10, 42});
  }
  EXPECT_EQ(b.snap("tenant:acme", 0).used, 1u);
  EXPECT_EQ(b.snap("tenant:acme", 1).used, 52u);
}

TEST(QuotaLedger, UsageBeyondTheReservationIsCountedNotForgiven) {
  Books b;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 1000)}));
  {
    auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {100, 100}, {}, g_now);
    a.reservation.dispatched();
    a.reservation.used({700, 800});  // the estimate was low
  }
  EXPECT_EQ(b.snap("tenant:acme").used, 1500u);
  auto r = b.ledger.reserve({b.owner("tenant:acme")}, "m", {1, 0}, {}, g_now + 59'000);
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(b.snap("tenant:acme").held, 0u);
}

TEST(QuotaLedger, TenantAndKeyAreChargedTogetherNeverBeyondEither) {
  Books b;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 1000)}));
  ASSERT_TRUE(b.ledger.set_owner("key:k1", {tokens("key-tpm", 300)}));
  ASSERT_TRUE(b.ledger.set_owner("key:k2", {tokens("key-tpm", 900)}));
  const Limits* t = b.owner("tenant:acme");
  auto a1 = b.ledger.reserve({t, b.owner("key:k1")}, "m", {0, 250}, {}, g_now);
  ASSERT_FALSE(a1.refused);
  EXPECT_EQ(a1.headroom.tokens.remaining, 50u);  // the key's is the tightest
  auto a2 = b.ledger.reserve({t, b.owner("key:k1")}, "m", {0, 100}, {}, g_now);
  ASSERT_TRUE(a2.refused);
  EXPECT_EQ(a2.refused->limit.name, "key-tpm");
  auto a3 = b.ledger.reserve({t, b.owner("key:k2")}, "m", {0, 700}, {}, g_now);
  ASSERT_FALSE(a3.refused);
  auto a4 = b.ledger.reserve({t, b.owner("key:k2")}, "m", {0, 100}, {}, g_now);
  ASSERT_TRUE(a4.refused);  // k2 has room (900 - 700), the tenant has 50
  EXPECT_EQ(a4.refused->limit.name, "tpm");
  // Neither refusal held anything on the limit that had room.
  EXPECT_EQ(b.snap("tenant:acme").held, 950u);
  EXPECT_EQ(b.snap("key:k2").held, 700u);
}

TEST(QuotaLedger, AModelLimitBindsOnlyItsModels) {
  Books b;
  LimitDef big = tokens("big", 100);
  big.models = {"llama-3-70b*"};
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 10'000), big}));
  const Limits* t = b.owner("tenant:acme");
  EXPECT_TRUE(b.ledger.reserve({t}, "llama-3-70b-instruct", {0, 200}, {}, g_now).refused);
  auto small = b.ledger.reserve({t}, "llama-3-8b", {0, 200}, {}, g_now);
  EXPECT_FALSE(small.refused);
  EXPECT_EQ(b.snap("tenant:acme", 1).held, 0u);
}

TEST(QuotaLedger, ARequestOfNoKnownModelIsHeldToEveryModelsLimit) {
  Books b;
  LimitDef big = tokens("big", 100);
  big.models = {"llama-3-70b*"};
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {big}));
  // A passthrough request: its body, and so its model, is not read.
  EXPECT_TRUE(b.ledger.reserve({b.owner("tenant:acme")}, "", {0, 200}, {}, g_now).refused);
}

TEST(QuotaLedger, AShadowLimitCountsButNeverRefuses) {
  Books b;
  LimitDef s = tokens("trial", 100);
  s.shadow = true;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {s}));
  auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 500}, {}, g_now);
  EXPECT_FALSE(a.refused);
  EXPECT_FALSE(a.headroom.tokens.present);  // not reported as a limit
  a.reservation.dispatched();
  a.reservation.used({0, 480});
  a.reservation.settle(g_now);
  const auto snap = b.snap("tenant:acme");
  EXPECT_EQ(snap.used, 480u);
  EXPECT_EQ(snap.would_refuse, 1u);
  EXPECT_EQ(snap.refused, 0u);
}

TEST(QuotaLedger, CostIsChargedAtTheModelsPriceRoundedUp) {
  EXPECT_EQ(amount_of(Measure::kCost, {1'000'000, 0}, {150'000, 600'000}), 150'000u);
  EXPECT_EQ(amount_of(Measure::kCost, {1, 1}, {150'000, 600'000}), 2u);  // 0.15 + 0.6 up
  EXPECT_EQ(amount_of(Measure::kCost, {0, 0}, {150'000, 600'000}), 0u);
  EXPECT_EQ(amount_of(Measure::kCost, {UINT64_MAX, 0}, {UINT64_MAX, 0}), UINT64_MAX);
  EXPECT_EQ(amount_of(Measure::kTokens, {UINT64_MAX, 5}, {}), UINT64_MAX);
  Books b;
  LimitDef budget = tokens("budget", 1'000'000);  // $1
  budget.measure = Measure::kCost;
  budget.period = {0, Calendar::kMonth};
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {budget}));
  auto r = b.ledger.reserve({b.owner("tenant:acme")}, "m", {1'000'000, 1'000'000},
                            {500'000, 600'000}, g_now);
  ASSERT_TRUE(r.refused);  // $1.10 > $1
  EXPECT_TRUE(r.refused->insufficient);
}

TEST(QuotaLedger, AReloadKeepsTheSpendOfALimitOfTheSameNameAndPeriod) {
  Books b;
  ASSERT_TRUE(
      b.ledger.set_owner("tenant:acme", {tokens("tpm", 1000), tokens("tph", 5000, 3'600'000)}));
  auto held = b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 100}, {}, g_now);
  {
    auto a = b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 400}, {}, g_now);
    a.reservation.dispatched();
    a.reservation.used({0, 400});
  }
  // tpm narrowed, tph's period changed: tpm keeps its 400, tph starts afresh.
  ASSERT_TRUE(
      b.ledger.set_owner("tenant:acme", {tokens("tpm", 450), tokens("tph", 5000, 7'200'000)}));
  EXPECT_EQ(b.snap("tenant:acme", 0).used, 400u);
  EXPECT_EQ(b.snap("tenant:acme", 0).amount, 450u);
  EXPECT_EQ(b.snap("tenant:acme", 1).used, 0u);
  EXPECT_TRUE(b.ledger.reserve({b.owner("tenant:acme")}, "m", {0, 1}, {}, g_now).refused);
  // The reservation taken before the reload settles into the same books.
  held.reservation.dispatched();
  held.reservation.used({0, 10});
  held.reservation.settle(g_now);
  EXPECT_EQ(b.snap("tenant:acme", 0).used, 410u);
  EXPECT_EQ(b.snap("tenant:acme", 0).held, 0u);
}

TEST(QuotaLedger, TheOwnerTableIsBoundedAndForgetsOnlyIdleOwners) {
  g_now = kT0;
  Ledger ledger(fake_now, 2);
  ASSERT_TRUE(ledger.set_owner("tenant:configured", {tokens("tpm", 10)}));  // not counted
  ASSERT_TRUE(ledger.set_owner("tenant:a", {tokens("tpm", 10)}, true));
  ASSERT_TRUE(ledger.set_owner("tenant:b", {tokens("tpm", 10)}, true));
  auto a = ledger.find("tenant:a");
  auto b = ledger.find("tenant:b");
  auto ra = ledger.reserve({a.get()}, "m", {1, 0}, {}, g_now);
  auto rb = ledger.reserve({b.get()}, "m", {1, 0}, {}, g_now);
  a.reset();
  b.reset();
  EXPECT_FALSE(ledger.set_owner("tenant:c", {tokens("tpm", 10)}, true));  // both busy
  EXPECT_EQ(ledger.owners(), 3u);
  rb.reservation.settle(g_now);  // b never dispatched: idle again
  // At most one scan a second: a full table of busy owners is not walked
  // by every new one.
  EXPECT_FALSE(ledger.set_owner("tenant:c", {tokens("tpm", 10)}, true));
  g_now += 1000;
  EXPECT_TRUE(ledger.set_owner("tenant:c", {tokens("tpm", 10)}, true));
  EXPECT_TRUE(ledger.find("tenant:a"));
  EXPECT_FALSE(ledger.find("tenant:b"));
  // Not one a request found (it may be about to reserve on it), idle or not.
  ra.reservation.settle(g_now);
  auto found = ledger.find("tenant:c");
  g_now += 1000;
  EXPECT_TRUE(ledger.set_owner("tenant:d", {tokens("tpm", 10)}, true));  // a goes, not c
  EXPECT_TRUE(ledger.find("tenant:c"));
  EXPECT_FALSE(ledger.find("tenant:a"));
  // An idle owner from the config is never forgotten to make room.
  EXPECT_TRUE(ledger.find("tenant:configured"));
  std::vector<LimitDef> too_many(Ledger::kMaxLimitsPerOwner + 1, tokens("x", 1));
  EXPECT_FALSE(ledger.set_owner("tenant:configured", too_many));
}

TEST(QuotaLedger, ThreadsReservingAtOnceNeverPassTheLimitAndTheBooksAddUp) {
  Books b;
  ASSERT_TRUE(b.ledger.set_owner("tenant:acme", {tokens("tpm", 50'000)}));
  ASSERT_TRUE(b.ledger.set_owner("key:k", {tokens("key", 20'000)}));
  const Limits* t = b.owner("tenant:acme");
  const Limits* k = b.owner("key:k");
  std::atomic<std::uint64_t> admitted{0}, with_key{0}, settled{0};
  std::vector<Reservation> kept[3];
  // Round 1: every admitted request holds on; the sum held is the limit's at most.
  // Round 2: each settles to half its worst case.
  auto run = [&](int seed) {
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t worst = 10 + static_cast<std::uint64_t>((i * 7 + seed) % 50);
      const bool keyed = (i + seed) % 2;
      auto a = b.ledger.reserve({t, keyed ? k : nullptr}, "m", {0, worst}, {}, kT0);
      if (a.refused) continue;
      admitted += worst;
      if (keyed) with_key += worst;
      a.reservation.dispatched();
      a.reservation.used({0, worst / 2});
      settled += worst / 2;
      kept[seed].push_back(std::move(a.reservation));
    }
  };
  auto settle = [&](int seed) {
    for (auto& r : kept[seed]) r.settle(kT0);
  };
  std::thread t1(run, 0), t2(run, 1), t3(run, 2);
  t1.join();
  t2.join();
  t3.join();
  auto s = b.snap("tenant:acme");
  EXPECT_EQ(s.held, admitted.load());
  EXPECT_LE(s.held, 50'000u);
  EXPECT_GT(s.held, 50'000u - 60);  // 6000 requests of 10-59 asked for more than the limit
  EXPECT_EQ(b.snap("key:k").held, with_key.load());
  EXPECT_LE(with_key.load(), 20'000u);
  EXPECT_GT(s.refused, 0u);
  std::thread s1(settle, 0), s2(settle, 1), s3(settle, 2);
  s1.join();
  s2.join();
  s3.join();
  for (int i = 0; i < 3; ++i)
    for (auto& r : kept[i]) EXPECT_TRUE(r.empty());
  s = b.snap("tenant:acme");
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(b.snap("key:k").held, 0u);
  EXPECT_EQ(s.used, settled.load());
}

}  // namespace
}  // namespace sluice::quota
