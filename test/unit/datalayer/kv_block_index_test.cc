// The KV-block index a KV-event source feeds (issue 40, item 4: the data
// layer shaped for one). Expectations are worked by hand: which endpoint
// stored which blocks, and so how long a prefix of a prompt each holds.
#include "datalayer/kv_block_index.h"

#include <gtest/gtest.h>

namespace sluice::datalayer {
namespace {

using Tokens = std::vector<std::uint32_t>;

KvEvent stored(std::vector<std::uint64_t> hashes, Tokens tokens, std::uint64_t parent = 0) {
  KvEvent e;
  e.kind = KvEvent::Kind::kStored;
  e.block_hashes = std::move(hashes);
  e.token_ids = std::move(tokens);
  e.block_size = 4;
  e.parent_hash = parent;
  return e;
}

KvEvent removed(std::vector<std::uint64_t> hashes) {
  KvEvent e;
  e.kind = KvEvent::Kind::kRemoved;
  e.block_hashes = std::move(hashes);
  return e;
}

KvEventBatch batch(std::size_t endpoint, KvEvent e) {
  KvEventBatch b;
  b.endpoint = endpoint;
  b.events.push_back(std::move(e));
  return b;
}

const Tokens kA = {1, 2, 3, 4}, kB = {5, 6, 7, 8}, kC = {9, 10, 11, 12};

std::uint64_t key(std::uint64_t parent, const Tokens& t) {
  return KvBlockIndex::block_key(parent, t);
}

std::vector<std::uint32_t> matches(const KvBlockIndex& index, std::vector<std::uint64_t> keys,
                                   std::size_t endpoints = 3) {
  std::vector<std::uint32_t> out(endpoints, 99);
  index.prefix_matches(keys, out);
  return out;
}

TEST(KvBlockIndex, AnEndpointHoldsThePrefixItStoredBlockByBlock) {
  KvBlockIndex index(100);
  const std::uint64_t a = key(0, kA), ab = key(a, kB);
  // Endpoint 0 stores A then B in one event; endpoint 1 stores A alone, and
  // its engine calls it by another hash.
  Tokens both = kA;
  both.insert(both.end(), kB.begin(), kB.end());
  index.apply(batch(0, stored({100, 101}, both)));
  index.apply(batch(1, stored({900}, kA)));
  EXPECT_EQ(index.blocks(), 2u);
  EXPECT_EQ(matches(index, {a, ab}), (std::vector<std::uint32_t>{2, 1, 0}));
  // B after A, as endpoint 1's next event (its parent named by its engine's hash).
  index.apply(batch(1, stored({901}, kB, 900)));
  EXPECT_EQ(matches(index, {a, ab}), (std::vector<std::uint32_t>{2, 2, 0}));
  // Endpoint 0 evicts A: it still has B, but no longer the prefix.
  index.apply(batch(0, removed({100})));
  EXPECT_EQ(matches(index, {a, ab}), (std::vector<std::uint32_t>{0, 2, 0}));
  // A prompt that starts elsewhere matches nothing.
  EXPECT_EQ(matches(index, {key(0, kC), ab}), (std::vector<std::uint32_t>{0, 0, 0}));
  // B's key depends on what came before it: B as a first block is another key.
  EXPECT_EQ(matches(index, {key(0, kB)}), (std::vector<std::uint32_t>{0, 0, 0}));
}

TEST(KvBlockIndex, ClearingAnEndpointLeavesTheOthers) {
  KvBlockIndex index(100);
  const std::uint64_t a = key(0, kA);
  index.apply(batch(0, stored({1}, kA)));
  index.apply(batch(2, stored({7}, kA)));
  KvEvent all;
  all.kind = KvEvent::Kind::kAllCleared;
  index.apply(batch(2, all));
  EXPECT_EQ(matches(index, {a}), (std::vector<std::uint32_t>{1, 0, 0}));
  index.remove_endpoint(0);
  EXPECT_EQ(matches(index, {a}), (std::vector<std::uint32_t>{0, 0, 0}));
  EXPECT_EQ(index.blocks(), 0u);
  // Removed twice: the second names a block the index no longer has.
  index.apply(batch(0, removed({1})));
  EXPECT_EQ(index.unknown(), 1u);
}

TEST(KvBlockIndex, PastItsBoundTheLeastRecentlyStoredBlockIsForgotten) {
  KvBlockIndex index(2);
  index.apply(batch(0, stored({1}, kA)));
  index.apply(batch(0, stored({2}, kB)));
  index.apply(batch(1, stored({3}, kA)));  // A stored again: newer than B
  index.apply(batch(0, stored({4}, kC)));  // a third key: B goes
  EXPECT_EQ(index.blocks(), 2u);
  EXPECT_EQ(index.forgotten(), 1u);
  EXPECT_EQ(matches(index, {key(0, kA)}), (std::vector<std::uint32_t>{1, 1, 0}));
  EXPECT_EQ(matches(index, {key(0, kB)}), (std::vector<std::uint32_t>{0, 0, 0}));
  EXPECT_EQ(matches(index, {key(0, kC)}), (std::vector<std::uint32_t>{1, 0, 0}));
  // The engine's later removal of the forgotten block is unknown, harmless.
  index.apply(batch(0, removed({2})));
  EXPECT_EQ(index.unknown(), 1u);
  EXPECT_EQ(index.blocks(), 2u);
}

TEST(KvBlockIndex, AnEventItCannotKeyIsCountedAndChangesNothing) {
  KvBlockIndex index(100);
  // A parent never stored (the source connected after it): the chain is unknowable.
  index.apply(batch(0, stored({5}, kB, 12345)));
  // Tokens that are not whole blocks.
  index.apply(batch(0, stored({6, 7}, kA)));
  KvEvent zero = stored({8}, kA);
  zero.block_size = 0;
  index.apply(batch(0, zero));
  EXPECT_EQ(index.unknown(), 3u);
  EXPECT_EQ(index.blocks(), 0u);
  // An endpoint beyond what the caller asks about is left out, not written.
  index.apply(batch(7, stored({9}, kA)));
  EXPECT_EQ(matches(index, {key(0, kA)}), (std::vector<std::uint32_t>{0, 0, 0}));
}

}  // namespace
}  // namespace sluice::datalayer
