// quota::Quotas: a config's limits over the ledger: listed tenants, the
// "*" entry per tenant, keys, prices, reloads.
#include "quota/quotas.h"

#include <gtest/gtest.h>

namespace sluice::quota {
namespace {

constexpr Millis kT0 = 1'796'601'600'000;
Millis fake_now() { return kT0; }

LimitDef tokens(std::string name, std::uint64_t amount) {
  LimitDef d;
  d.name = std::move(name);
  d.amount = amount;
  d.period.window = 60'000;
  return d;
}

QuotaPolicy policy_with(std::uint64_t acme, std::optional<std::uint64_t> others) {
  QuotaPolicy p;
  p.tenants["acme"] = {tokens("tpm", acme)};
  if (others) {
    p.has_default = true;
    p.default_limits = {tokens("tpm", *others)};
  }
  return p;
}

TEST(Quotas, PricesMatchExactBeforeTheLongestPrefix) {
  QuotaPolicy p;
  p.prices = {{"*", {1, 1}}, {"llama-*", {2, 2}}, {"llama-3-*", {3, 3}}, {"llama-3-8b", {4, 4}}};
  EXPECT_EQ(p.price_of("llama-3-8b").input_per_million, 4u);
  EXPECT_EQ(p.price_of("llama-3-70b").input_per_million, 3u);
  EXPECT_EQ(p.price_of("llama-2").input_per_million, 2u);
  EXPECT_EQ(p.price_of("qwen").input_per_million, 1u);
  p.prices.erase(p.prices.begin());
  EXPECT_EQ(p.price_of("qwen").input_per_million, 0u);
}

TEST(Quotas, EveryTenantTheStarCoversHasItsOwnLimit) {
  Quotas q(fake_now);
  const auto p = policy_with(1000, 100);
  q.configure(p);
  std::string scratch;
  auto a = q.reserve(p, "acme", "", "m", {0, 500}, kT0, scratch);
  EXPECT_TRUE(a.limited);
  EXPECT_FALSE(a.admit.refused);
  auto x1 = q.reserve(p, "x", "", "m", {0, 80}, kT0, scratch);
  auto y1 = q.reserve(p, "y", "", "m", {0, 80}, kT0, scratch);  // not x's limit
  EXPECT_FALSE(x1.admit.refused);
  EXPECT_FALSE(y1.admit.refused);
  EXPECT_TRUE(q.reserve(p, "x", "", "m", {0, 80}, kT0, scratch).admit.refused);
  // Without a "*" entry an unlisted tenant is not limited.
  const auto none = policy_with(1000, std::nullopt);
  q.configure(none);
  EXPECT_FALSE(q.reserve(none, "z", "", "m", {0, 1'000'000}, kT0, scratch).limited);
  EXPECT_FALSE(q.ledger().find("t:x"));  // forgotten with the "*" entry
}

// A thread still on the old policy meets a new tenant after a reload: it
// gets the new "*" limits, not the ones its policy names.
TEST(Quotas, ATenantFirstSeenAfterAReloadGetsTheNewStarLimits) {
  Quotas q(fake_now);
  const auto old_policy = policy_with(1000, 1000);
  q.configure(old_policy);
  q.configure(policy_with(1000, 10));
  std::string scratch;
  auto a = q.reserve(old_policy, "new", "", "m", {0, 50}, kT0, scratch);
  EXPECT_TRUE(a.admit.refused);
  EXPECT_EQ((*q.ledger().find("t:new"))[0]->def().amount, 10u);
}

TEST(Quotas, AKeyListedTwiceHasItsFirstEntrysLimits) {
  Quotas q(fake_now);
  q.configure(policy_with(1000, std::nullopt));
  EXPECT_EQ(q.set_keys({{"key_1", {tokens("admin", 10)}}, {"key_1", {tokens("file", 500)}}}), 0u);
  EXPECT_EQ((*q.ledger().find("k:key_1"))[0]->def().name, "admin");
}

TEST(Quotas, AnOwnerWithMoreLimitsThanTheLedgerHoldsIsReported) {
  Quotas q(fake_now);
  QuotaPolicy p = policy_with(1000, std::nullopt);
  p.tenants["big"] = std::vector<LimitDef>(Ledger::kMaxLimitsPerOwner + 1, tokens("x", 1));
  EXPECT_EQ(q.configure(p), 1u);
}

TEST(Quotas, AKeysLimitsAreChargedWithItsTenants) {
  Quotas q(fake_now);
  const auto p = policy_with(1000, std::nullopt);
  q.configure(p);
  q.set_key("key_1", {tokens("key-tpm", 100)});
  std::string scratch;
  auto a = q.reserve(p, "acme", "key_1", "m", {0, 90}, kT0, scratch);
  ASSERT_FALSE(a.admit.refused);
  auto b = q.reserve(p, "acme", "key_1", "m", {0, 20}, kT0, scratch);
  ASSERT_TRUE(b.admit.refused);
  EXPECT_EQ(b.admit.refused->owner, "k:key_1");
  EXPECT_FALSE(q.reserve(p, "acme", "key_2", "m", {0, 20}, kT0, scratch).admit.refused);
  q.set_key("key_1", {});
  EXPECT_FALSE(q.reserve(p, "acme", "key_1", "m", {0, 20}, kT0, scratch).admit.refused);
}

TEST(Quotas, AReloadRedefinesLimitsKeepingTheirSpend) {
  Quotas q(fake_now);
  auto p = policy_with(1000, 1000);
  q.configure(p);
  std::string scratch;
  for (const char* t : {"acme", "other"}) {
    auto a = q.reserve(p, t, "", "m", {0, 600}, kT0, scratch);
    a.admit.reservation.dispatched();
    a.admit.reservation.used({0, 600});
  }
  p = policy_with(700, 700);
  q.configure(p);
  for (const char* t : {"acme", "other"})
    EXPECT_TRUE(q.reserve(p, t, "", "m", {0, 200}, kT0, scratch).admit.refused) << t;
}

TEST(Quotas, AFullOwnerTableRefusesANewTenantItCannotCount) {
  Quotas q(fake_now, 1);
  const auto p = policy_with(1000, 100);
  q.configure(p);  // acme is the config's: not one of the one place
  std::string scratch;
  auto held = q.reserve(p, "x", "", "m", {0, 5}, kT0, scratch);  // x takes it
  ASSERT_FALSE(held.owners_full);
  auto y = q.reserve(p, "y", "", "m", {0, 5}, kT0, scratch);
  EXPECT_TRUE(y.owners_full);
  EXPECT_FALSE(y.limited);
  // A listed tenant is never refused for room, nor forgotten: still limited.
  auto acme = q.reserve(p, "acme", "", "m", {0, 5000}, kT0, scratch);
  EXPECT_TRUE(acme.limited);
  EXPECT_TRUE(acme.admit.refused);
}

}  // namespace
}  // namespace sluice::quota
