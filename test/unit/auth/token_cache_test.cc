// TokenCache on a fake clock (times are passed in): hits, expiry, the
// capacity bound under many more tokens than it holds, CLOCK's second
// chance, clear().
#include "auth/token_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::auth {
namespace {

constexpr std::int64_t kNow = 1'700'000'000;

VerifiedToken token_for(const std::string& tenant, std::int64_t expires_at) {
  VerifiedToken t;
  t.tenant = tenant;
  t.objective = "chat";
  t.expires_at = expires_at;
  t.kid = "k";
  t.alg = JwtAlg::kEdDSA;
  return t;
}

TEST(TokenCache, FindsWhatWasInserted) {
  TokenCache cache(16);
  const Digest key = TokenCache::key_of("header.payload.sig");
  EXPECT_EQ(cache.find(key, kNow), nullptr);
  cache.insert(key, token_for("acme", kNow + 60), kNow);
  const VerifiedToken* hit = cache.find(key, kNow);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tenant, "acme");
  EXPECT_EQ(hit->objective, "chat");
  EXPECT_EQ(hit->expires_at, kNow + 60);
  EXPECT_EQ(cache.find(TokenCache::key_of("header.payload.sih"), kNow), nullptr);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(TokenCache, KeyIsTheTokensSha256) { EXPECT_EQ(TokenCache::key_of("abc"), sha256("abc")); }

TEST(TokenCache, AnEntryAtItsExpiryIsAMissAndIsRemoved) {
  TokenCache cache(16);
  const Digest key = TokenCache::key_of("t");
  cache.insert(key, token_for("acme", kNow + 10), kNow);
  EXPECT_NE(cache.find(key, kNow + 9), nullptr);
  EXPECT_EQ(cache.find(key, kNow + 10), nullptr);
  EXPECT_EQ(cache.size(), 0u);
  // Gone, not only hidden: an earlier time does not bring it back.
  EXPECT_EQ(cache.find(key, kNow), nullptr);
}

TEST(TokenCache, ExpiredOrEndlessTokensAreNotKept) {
  TokenCache cache(16);
  cache.insert(TokenCache::key_of("a"), token_for("a", kNow), kNow);
  cache.insert(TokenCache::key_of("b"), token_for("b", kNow - 1), kNow);
  cache.insert(TokenCache::key_of("c"), token_for("c", 0), kNow);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(TokenCache, ASecondInsertOfTheSameTokenKeepsOneEntry) {
  TokenCache cache(4);
  const Digest key = TokenCache::key_of("t");
  cache.insert(key, token_for("first", kNow + 60), kNow);
  cache.insert(key, token_for("second", kNow + 60), kNow);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find(key, kNow)->tenant, "first");
}

TEST(TokenCache, CapacityHoldsUnderTenTimesAsManyTokens) {
  constexpr std::size_t kCapacity = 64;
  TokenCache cache(kCapacity);
  EXPECT_EQ(cache.capacity(), kCapacity);
  for (std::size_t i = 0; i < 10 * kCapacity; ++i) {
    const Digest key = TokenCache::key_of("token-" + std::to_string(i));
    cache.insert(key, token_for("t" + std::to_string(i), kNow + 600), kNow);
    ASSERT_LE(cache.size(), kCapacity);
    // The newest entry is always there.
    ASSERT_NE(cache.find(key, kNow), nullptr) << i;
    // Half of the time, an older one is found again (gets its second chance).
    if (i % 2 == 0) cache.find(TokenCache::key_of("token-" + std::to_string(i / 2)), kNow);
  }
  EXPECT_EQ(cache.size(), kCapacity);
  std::size_t found = 0;
  for (std::size_t i = 0; i < 10 * kCapacity; ++i)
    found += cache.find(TokenCache::key_of("token-" + std::to_string(i)), kNow) != nullptr;
  EXPECT_EQ(found, kCapacity);
}

TEST(TokenCache, ARecentlyFoundEntrySurvivesTheNextEviction) {
  TokenCache cache(3);
  const Digest a = TokenCache::key_of("a"), b = TokenCache::key_of("b"),
               c = TokenCache::key_of("c"), d = TokenCache::key_of("d");
  cache.insert(a, token_for("a", kNow + 60), kNow);
  cache.insert(b, token_for("b", kNow + 60), kNow);
  cache.insert(c, token_for("c", kNow + 60), kNow);
  ASSERT_NE(cache.find(a, kNow), nullptr);
  cache.insert(d, token_for("d", kNow + 60), kNow);
  EXPECT_NE(cache.find(a, kNow), nullptr);
  EXPECT_EQ(cache.find(b, kNow), nullptr);
  EXPECT_NE(cache.find(c, kNow), nullptr);
  EXPECT_NE(cache.find(d, kNow), nullptr);
}

TEST(TokenCache, AnExpiredEntryIsEvictedEvenIfRecentlyFound) {
  TokenCache cache(2);
  const Digest a = TokenCache::key_of("a"), b = TokenCache::key_of("b"),
               c = TokenCache::key_of("c");
  cache.insert(a, token_for("a", kNow + 5), kNow);
  cache.insert(b, token_for("b", kNow + 60), kNow);
  ASSERT_NE(cache.find(a, kNow), nullptr);
  ASSERT_NE(cache.find(b, kNow), nullptr);
  cache.insert(c, token_for("c", kNow + 60), kNow + 5);  // a has expired by now
  EXPECT_EQ(cache.find(a, kNow), nullptr);
  EXPECT_NE(cache.find(b, kNow + 5), nullptr);
  EXPECT_NE(cache.find(c, kNow + 5), nullptr);
}

TEST(TokenCache, ClearForgetsEverythingAndTheCacheFillsAgain) {
  TokenCache cache(8);
  for (int i = 0; i < 8; ++i)
    cache.insert(TokenCache::key_of(std::to_string(i)), token_for("t", kNow + 60), kNow);
  ASSERT_EQ(cache.size(), 8u);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(cache.find(TokenCache::key_of(std::to_string(i)), kNow), nullptr);
  for (int i = 0; i < 20; ++i)
    cache.insert(TokenCache::key_of("n" + std::to_string(i)), token_for("t", kNow + 60), kNow);
  EXPECT_EQ(cache.size(), 8u);
}

TEST(TokenCache, ACapacityOfZeroHoldsOne) {
  TokenCache cache(0);
  EXPECT_EQ(cache.capacity(), 1u);
  cache.insert(TokenCache::key_of("a"), token_for("a", kNow + 60), kNow);
  cache.insert(TokenCache::key_of("b"), token_for("b", kNow + 60), kNow);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.find(TokenCache::key_of("b"), kNow), nullptr);
}

}  // namespace
}  // namespace sluice::auth
