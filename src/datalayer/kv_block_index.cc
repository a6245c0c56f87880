#include "datalayer/kv_block_index.h"

#include <xxhash.h>

#include <algorithm>

namespace sluice::datalayer {

KvBlockIndex::KvBlockIndex(std::size_t max_blocks)
    : max_blocks_(std::max<std::size_t>(max_blocks, 1)) {}

std::uint64_t KvBlockIndex::block_key(std::uint64_t parent, std::span<const std::uint32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

std::size_t KvBlockIndex::EngineBlockHash::operator()(const EngineBlock& b) const {
  return static_cast<std::size_t>(b.hash * 0x9E3779B97F4A7C15ull ^ b.endpoint);
}

void KvBlockIndex::apply(const KvEventBatch& batch) {
  for (const KvEvent& e : batch.events) {
    switch (e.kind) {
      case KvEvent::Kind::kStored:
        store(batch.endpoint, e);
        break;
      case KvEvent::Kind::kRemoved:
        remove(batch.endpoint, e);
        break;
      case KvEvent::Kind::kAllCleared:
        clear(batch.endpoint);
        break;
    }
  }
}

// The blocks chain from the parent's key (found by the parent's engine
// hash); a parent the index does not know (forgotten, or stored before the
// source connected) makes the chain unknowable: the blocks are skipped.
void KvBlockIndex::store(std::size_t endpoint, const KvEvent& e) {
  std::uint64_t parent = 0;
  if (e.parent_hash != 0) {
    auto it = engine_keys_.find({endpoint, e.parent_hash});
    if (it == engine_keys_.end()) {
      ++unknown_;
      return;
    }
    parent = it->second;
  }
  if (e.block_size == 0 || e.token_ids.size() != e.block_hashes.size() * e.block_size) {
    ++unknown_;  // not whole blocks: nothing to key them by
    return;
  }
  std::span<const std::uint32_t> tokens(e.token_ids);
  for (std::size_t i = 0; i < e.block_hashes.size(); ++i) {
    const std::uint64_t key = block_key(parent, tokens.subspan(i * e.block_size, e.block_size));
    hold(endpoint, e.block_hashes[i], key);
    parent = key;
  }
}

void KvBlockIndex::remove(std::size_t endpoint, const KvEvent& e) {
  for (std::uint64_t hash : e.block_hashes) {
    auto it = engine_keys_.find({endpoint, hash});
    if (it == engine_keys_.end()) {
      ++unknown_;
      continue;
    }
    release(endpoint, it->second);
  }
}

void KvBlockIndex::clear(std::size_t endpoint) {
  std::vector<std::uint64_t> keys;
  for (const auto& [held, key] : engine_keys_)
    if (held.endpoint == endpoint) keys.push_back(key);
  for (std::uint64_t key : keys) release(endpoint, key);
}

void KvBlockIndex::remove_endpoint(std::size_t endpoint) { clear(endpoint); }

void KvBlockIndex::hold(std::size_t endpoint, std::uint64_t engine_hash, std::uint64_t key) {
  auto [it, inserted] = blocks_.try_emplace(key);
  Block& b = it->second;
  if (inserted) {
    ages_.push_front(key);
  } else {
    ages_.splice(ages_.begin(), ages_, b.age);  // stored again: the newest
  }
  b.age = ages_.begin();
  const auto ep = static_cast<std::uint32_t>(endpoint);
  auto h = std::lower_bound(b.holders.begin(), b.holders.end(), ep,
                            [](const Holder& x, std::uint32_t e) { return x.endpoint < e; });
  if (h != b.holders.end() && h->endpoint == ep) {
    if (h->engine_hash != engine_hash) {
      engine_keys_.erase({endpoint, h->engine_hash});
      h->engine_hash = engine_hash;
    }
  } else {
    b.holders.insert(h, Holder{ep, engine_hash});
  }
  engine_keys_[{endpoint, engine_hash}] = key;
  if (blocks_.size() > max_blocks_) forget_oldest();
}

void KvBlockIndex::release(std::size_t endpoint, std::uint64_t key) {
  auto it = blocks_.find(key);
  if (it == blocks_.end()) return;
  Block& b = it->second;
  auto h = std::find_if(b.holders.begin(), b.holders.end(),
                        [&](const Holder& x) { return x.endpoint == endpoint; });
  if (h == b.holders.end()) return;
  engine_keys_.erase({endpoint, h->engine_hash});
  b.holders.erase(h);
  if (b.holders.empty()) {
    ages_.erase(b.age);
    blocks_.erase(it);
  }
}

void KvBlockIndex::forget_oldest() {
  const std::uint64_t key = ages_.back();
  auto it = blocks_.find(key);
  for (const Holder& h : it->second.holders) engine_keys_.erase({h.endpoint, h.engine_hash});
  blocks_.erase(it);
  ages_.pop_back();
  ++forgotten_;
}

// An endpoint's count only advances while it has held every key so far:
// out[e] == i before key i means e holds keys 0..i-1.
void KvBlockIndex::prefix_matches(std::span<const std::uint64_t> keys,
                                  std::vector<std::uint32_t>& out) const {
  std::fill(out.begin(), out.end(), 0);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto it = blocks_.find(keys[i]);
    if (it == blocks_.end()) return;
    bool advanced = false;
    for (const Holder& h : it->second.holders) {
      if (h.endpoint < out.size() && out[h.endpoint] == i) {
        out[h.endpoint] = static_cast<std::uint32_t>(i + 1);
        advanced = true;
      }
    }
    if (!advanced) return;
  }
}

}  // namespace sluice::datalayer
