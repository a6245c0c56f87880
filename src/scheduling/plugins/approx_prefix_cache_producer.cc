#include "scheduling/plugins/approx_prefix_cache_producer.h"

#include <algorithm>
#include <bit>
#include <random>

namespace sluice::scheduling {

namespace {
// How many blocks ahead match starts loading the table's lines.
constexpr std::size_t kPrefetchAhead = 8;
}  // namespace

void BlockHolders::Entry::push(Holder h) {
  if (n < 3)
    small[n] = h;
  else
    more.push_back(h);
  ++n;
}

void BlockHolders::Entry::erase(std::uint32_t i) {
  at(i) = at(n - 1);
  if (n > 3) more.pop_back();
  --n;
}

BlockHolders::BlockHolders() {
  std::random_device rd;
  seed_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

BlockHolders::Entry* BlockHolders::find(std::uint64_t hash) {
  return const_cast<Entry*>(static_cast<const BlockHolders*>(this)->find(hash));
}

const BlockHolders::Entry* BlockHolders::find(std::uint64_t hash) const {
  if (size_ == 0) return nullptr;
  const std::size_t mask = entries_.size() - 1;
  for (std::size_t i = home(hash);; i = (i + 1) & mask) {
    const Entry& e = entries_[i];
    if (!e.used) return nullptr;
    if (e.hash == hash) return &e;
  }
}

BlockHolders::Entry& BlockHolders::get_or_insert(std::uint64_t hash) {
  if (Entry* e = find(hash)) return *e;
  if ((size_ + 1) * 2 > entries_.size()) grow();
  const std::size_t mask = entries_.size() - 1;
  std::size_t i = home(hash);
  while (entries_[i].used) i = (i + 1) & mask;
  entries_[i].hash = hash;
  entries_[i].used = true;
  ++size_;
  return entries_[i];
}

void BlockHolders::erase(std::uint64_t hash) {
  if (size_ == 0) return;
  const std::size_t mask = entries_.size() - 1;
  std::size_t i = home(hash);
  for (;; i = (i + 1) & mask) {
    if (!entries_[i].used) return;
    if (entries_[i].hash == hash) break;
  }
  entries_[i] = Entry{};
  --size_;
  // Backward shift: an entry further along the run moves into the hole
  // unless its home lies cyclically in (hole, its place].
  for (std::size_t j = (i + 1) & mask; entries_[j].used; j = (j + 1) & mask) {
    const std::size_t h = home(entries_[j].hash);
    const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    entries_[i] = std::move(entries_[j]);
    entries_[j] = Entry{};
    i = j;
  }
}

void BlockHolders::grow() {
  std::vector<Entry> old = std::move(entries_);
  entries_.assign(old.empty() ? 64 : old.size() * 2, Entry{});
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(entries_.size()));
  const std::size_t mask = entries_.size() - 1;
  for (Entry& e : old) {
    if (!e.used) continue;
    std::size_t i = home(e.hash);
    while (entries_[i].used) i = (i + 1) & mask;
    entries_[i] = std::move(e);
  }
}

void PrefixIndex::unlink(Lru& l, std::uint32_t n) {
  Node& x = l.nodes[n];
  if (x.prev != kNone)
    l.nodes[x.prev].next = x.next;
  else
    l.head = x.next;
  if (x.next != kNone)
    l.nodes[x.next].prev = x.prev;
  else
    l.tail = x.prev;
  x.prev = x.next = kNone;
}

void PrefixIndex::push_front(Lru& l, std::uint32_t n) {
  Node& x = l.nodes[n];
  x.prev = kNone;
  x.next = l.head;
  if (l.head != kNone) l.nodes[l.head].prev = n;
  l.head = n;
  if (l.tail == kNone) l.tail = n;
}

void PrefixIndex::drop_holder(std::uint64_t hash, std::uint32_t slot) {
  BlockHolders::Entry* e = holders_.find(hash);
  if (!e) return;
  for (std::uint32_t i = 0; i < e->n; ++i) {
    if (e->at(i).slot == slot) {
      e->erase(i);
      break;
    }
  }
  if (e->n == 0) holders_.erase(hash);
}

void PrefixIndex::match(std::span<const std::uint64_t> hashes, PrefixMatch& out) {
  out.total_blocks = hashes.size();
  out.matched.clear();
  touched_.clear();
  if (hashes.empty()) return;
  const BlockHolders::Entry* e = holders_.find(hashes[0]);
  if (!e) return;
  for (std::uint32_t k = 0; k < e->n; ++k) {
    const std::uint32_t slot = e->at(k).slot;
    if (slot >= run_.size()) {
      run_.resize(slot + 1, 0);
      marked_.resize(slot + 1, 0);
    }
    touched_.push_back(slot);
  }
  resolve(hashes, 0, hashes.size() - 1, 0, touched_.size());
  for (std::uint32_t slot : touched_) {
    out.matched.emplace_back(slot, run_[slot]);
    run_[slot] = 0;
  }
}

std::size_t PrefixIndex::partition_held(const BlockHolders::Entry* e, std::size_t first,
                                        std::size_t last) {
  if (!e) return first;
  for (std::uint32_t k = 0; k < e->n; ++k) {
    const std::uint32_t slot = e->at(k).slot;
    if (slot < marked_.size()) marked_[slot] = 1;
  }
  const auto mid = std::partition(touched_.begin() + static_cast<std::ptrdiff_t>(first),
                                  touched_.begin() + static_cast<std::ptrdiff_t>(last),
                                  [&](std::uint32_t slot) { return marked_[slot] != 0; });
  for (std::uint32_t k = 0; k < e->n; ++k) {
    const std::uint32_t slot = e->at(k).slot;
    if (slot < marked_.size()) marked_[slot] = 0;
  }
  return static_cast<std::size_t>(mid - touched_.begin());
}

void PrefixIndex::resolve(std::span<const std::uint64_t> hashes, std::size_t a, std::size_t b,
                          std::size_t first, std::size_t last) {
  // Iterative on the upper half, recursive on the lower: depth at most
  // log2(blocks) (256 blocks: 8).
  while (first < last) {
    if (a == b) {
      for (std::size_t i = first; i < last; ++i)
        run_[touched_[i]] = static_cast<std::uint32_t>(a + 1);
      return;
    }
    // Those holding block b hold [a, b] whole.
    const std::size_t held = partition_held(holders_.find(hashes[b]), first, last);
    for (std::size_t i = first; i < held; ++i)
      run_[touched_[i]] = static_cast<std::uint32_t>(b + 1);
    first = held;
    if (first == last) return;
    --b;  // the rest end in [a, b - 1]
    if (a == b) continue;
    const std::size_t mid = a + (b - a + 1) / 2;  // a < mid <= b
    const std::size_t upper = partition_held(holders_.find(hashes[mid]), first, last);
    resolve(hashes, a, mid - 1, upper, last);  // not holding mid: end in [a, mid - 1]
    last = upper;                              // holding mid: end in [mid, b]
    a = mid;
  }
}

void PrefixIndex::insert(std::uint32_t slot, std::span<const std::uint64_t> hashes) {
  if (capacity_ == 0 || hashes.empty()) return;
  if (slot >= lrus_.size()) lrus_.resize(slot + 1);
  Lru& l = lrus_[slot];
  // Oldest first, so the first block ends most recent: a prefix's head is
  // the last to be evicted, as in an engine's own cache. That leaves a
  // prompt's blocks side by side in its endpoint's list, in order, so the
  // block before one found here is usually the node just before it: the
  // shared table is probed only where that chain is broken (the first
  // block, a block new here, a shared head another prompt moved).
  std::uint32_t before = kNone;  // the node in front of the last one found
  for (std::size_t k = hashes.size(); k-- > 0;) {
    const std::uint64_t h = hashes[k];
    std::uint32_t node = kNone;
    if (before != kNone && l.nodes[before].hash == h) {
      node = before;  // a node of this list: the one holding h here
    } else if (const BlockHolders::Entry* e = holders_.find(h)) {
      for (std::uint32_t j = 0; j < e->n; ++j)
        if (e->at(j).slot == slot) node = e->at(j).node;
    }
    if (node != kNone) {
      before = l.nodes[node].prev;
      unlink(l, node);
      push_front(l, node);
      continue;
    }
    before = kNone;
    if (l.size >= capacity_) {
      const std::uint32_t victim = l.tail;
      const std::uint64_t old = l.nodes[victim].hash;
      unlink(l, victim);
      l.free.push_back(victim);
      --l.size;
      if (old != h) drop_holder(old, slot);
    }
    if (!l.free.empty()) {
      node = l.free.back();
      l.free.pop_back();
    } else {
      node = static_cast<std::uint32_t>(l.nodes.size());
      l.nodes.emplace_back();
    }
    l.nodes[node].hash = h;
    push_front(l, node);
    ++l.size;
    holders_.get_or_insert(h).push(Holder{slot, node});  // after drop_holder: entries moved
  }
}

void PrefixIndex::forget(std::uint32_t slot) {
  if (slot >= lrus_.size()) return;
  Lru& l = lrus_[slot];
  for (std::uint32_t n = l.head; n != kNone; n = l.nodes[n].next)
    drop_holder(l.nodes[n].hash, slot);
  l = Lru{};
}

void ApproxPrefixCacheProducer::pre_request(CycleState& cycle, const Request& request,
                                            SchedulingResult& result) {
  if (request.prefix_hashes.empty()) return;
  if (keep_match_) match(cycle, request);  // before this request's blocks count as cached
  for (const Endpoint* e : result.serving) index_.insert(e->index, request.prefix_hashes);
}

PrefixParams read_prefix_params(PluginParams& p) {
  PrefixParams out;
  if (auto v = p.integer("blockSizeTokens", 1, 1 << 20))
    out.block_size_tokens = static_cast<std::uint32_t>(*v);
  // GIE's older parameter: the block size in characters (4 per token).
  if (auto v = p.integer("blockSize", 4, 4 << 20))
    out.block_size_tokens = static_cast<std::uint32_t>(*v / 4);
  // llm-d: 0 for both caps matches the whole prompt (bounded here by the
  // request body limit, which bounds the prompt).
  auto blocks = p.integer("maxPrefixBlocksToMatch", 0, 1 << 20);
  auto tokens = p.integer("maxPrefixTokensToMatch", 0, std::int64_t{1} << 32);
  if (blocks) out.max_prefix_blocks_to_match = static_cast<std::uint32_t>(*blocks);
  if (tokens && *tokens > 0) {
    // llm-d: the token cap wins when set, as whole blocks of blockSizeTokens.
    const std::int64_t n = *tokens / out.block_size_tokens;
    if (n == 0)
      p.fail("maxPrefixTokensToMatch", "is below blockSizeTokens (" +
                                           std::to_string(out.block_size_tokens) +
                                           "): no block would be matched");
    out.max_prefix_blocks_to_match = static_cast<std::uint32_t>(std::min<std::int64_t>(n, 1 << 20));
  } else if (tokens && (!blocks || *blocks == 0)) {
    out.max_prefix_blocks_to_match = 0;  // both caps 0 (or only the token cap, 0): no cap
  }
  if (out.max_prefix_blocks_to_match == 0) out.max_prefix_blocks_to_match = kUnlimitedPrefixBlocks;
  if (auto v = p.integer("lruCapacityPerServer", 1, 1 << 26))
    out.lru_capacity_per_server = static_cast<std::uint32_t>(*v);
  p.boolean("autoTune");  // GIE: size the LRU from the engine's cache info; sluice uses the
                          // capacity given
  return out;
}

}  // namespace sluice::scheduling
