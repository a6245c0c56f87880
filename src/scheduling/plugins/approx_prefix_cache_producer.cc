#include "scheduling/plugins/approx_prefix_cache_producer.h"

#include <algorithm>

namespace sluice::scheduling {

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
  auto it = holders_.find(hash);
  if (it == holders_.end()) return;
  auto& v = it->second;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i].slot == slot) {
      v[i] = v.back();
      v.pop_back();
      break;
    }
  }
  if (v.empty()) holders_.erase(it);
}

void PrefixIndex::match(std::span<const std::uint64_t> hashes, PrefixMatch& out) {
  out.total_blocks = hashes.size();
  out.matched.clear();
  touched_.clear();
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    auto it = holders_.find(hashes[i]);
    if (it == holders_.end()) break;
    bool advanced = false;
    for (const Holder& h : it->second) {
      if (h.slot >= run_.size()) run_.resize(h.slot + 1, 0);
      if (run_[h.slot] != i) continue;  // its run broke earlier
      if (i == 0) touched_.push_back(h.slot);
      run_[h.slot] = static_cast<std::uint32_t>(i + 1);
      advanced = true;
    }
    if (!advanced) break;
  }
  for (std::uint32_t slot : touched_) {
    out.matched.emplace_back(slot, run_[slot]);
    run_[slot] = 0;
  }
}

void PrefixIndex::insert(std::uint32_t slot, std::span<const std::uint64_t> hashes) {
  if (capacity_ == 0 || hashes.empty()) return;
  if (slot >= lrus_.size()) lrus_.resize(slot + 1);
  Lru& l = lrus_[slot];
  // Oldest first, so the first block ends most recent: a prefix's head is
  // the last to be evicted, as in an engine's own cache.
  for (std::size_t k = hashes.size(); k-- > 0;) {
    const std::uint64_t h = hashes[k];
    auto& holders = holders_[h];
    std::uint32_t node = kNone;
    for (const Holder& x : holders)
      if (x.slot == slot) node = x.node;
    if (node != kNone) {
      unlink(l, node);
      push_front(l, node);
      continue;
    }
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
    holders_[h].push_back(Holder{slot, node});  // re-find: drop_holder may have rehashed
  }
}

void PrefixIndex::forget(std::uint32_t slot) {
  if (slot >= lrus_.size()) return;
  Lru& l = lrus_[slot];
  for (std::uint32_t n = l.head; n != kNone; n = l.nodes[n].next)
    drop_holder(l.nodes[n].hash, slot);
  l = Lru{};
}

void ApproxPrefixCacheProducer::pre_request(CycleState&, const Request& request,
                                            SchedulingResult& result) {
  if (request.prefix_hashes.empty()) return;
  for (const Endpoint* e : result.serving) index_.insert(e->index, request.prefix_hashes);
}

PrefixParams read_prefix_params(PluginParams& p) {
  PrefixParams out;
  if (auto v = p.integer("blockSizeTokens", 1, 1 << 20))
    out.block_size_tokens = static_cast<std::uint32_t>(*v);
  // GIE's older parameter: the block size in characters (4 per token).
  if (auto v = p.integer("blockSize", 4, 4 << 20))
    out.block_size_tokens = static_cast<std::uint32_t>(*v / 4);
  if (auto v = p.integer("maxPrefixBlocksToMatch", 1, 1 << 20))
    out.max_prefix_blocks_to_match = static_cast<std::uint32_t>(*v);
  if (auto v = p.integer("lruCapacityPerServer", 1, 1 << 26))
    out.lru_capacity_per_server = static_cast<std::uint32_t>(*v);
  p.boolean("autoTune");  // GIE: size the LRU from the engine's cache info; sluice uses the
                          // capacity given
  return out;
}

}  // namespace sluice::scheduling
