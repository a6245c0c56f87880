// Which endpoint holds which block of tokens in its KV cache, from the
// engines' KV events (datalayer/kv_events.h): the index a precise
// prefix-cache scorer reads. A block is keyed by its tokens and by every
// block before it (a chain, as prefix hashes are), so "endpoint e holds key
// k" means e holds that whole prefix.
//
// One writer (the dispatcher). Bounded: at most max_blocks keys; past it
// the least recently stored key is forgotten (an endpoint that still has
// the block scores as if it had not: a lost hint, never a wrong one) and
// counted. An engine's hashes are mapped to keys for its kRemoved events:
// one entry per (endpoint, key) held, so bounded by max_blocks times the
// pool's endpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "datalayer/kv_events.h"

namespace sluice::datalayer {

class KvBlockIndex {
 public:
  explicit KvBlockIndex(std::size_t max_blocks);

  // The key of a block of `tokens` following the block keyed `parent` (0:
  // the first block of a prompt). What a request's prompt, once tokenized,
  // is looked up by.
  static std::uint64_t block_key(std::uint64_t parent, std::span<const std::uint32_t> tokens);

  void apply(const KvEventBatch& batch);
  // The endpoint left the pool: everything it held goes.
  void remove_endpoint(std::size_t endpoint);

  // out[e] = how many of `keys` (a prompt's block keys, in order) endpoint
  // e holds from the first on, for e < out.size() (the caller sizes it).
  void prefix_matches(std::span<const std::uint64_t> keys, std::vector<std::uint32_t>& out) const;

  std::size_t blocks() const { return blocks_.size(); }
  std::uint64_t forgotten() const { return forgotten_; }  // keys dropped by the bound
  std::uint64_t unknown() const { return unknown_; }      // events naming a block never stored

 private:
  struct Holder {
    std::uint32_t endpoint;
    std::uint64_t engine_hash;  // what that endpoint's engine calls it
  };
  struct Block {
    std::vector<Holder> holders;  // by endpoint, one each
    std::list<std::uint64_t>::iterator age;
  };
  // (endpoint, engine hash): an engine's hashes are its own.
  struct EngineBlock {
    std::size_t endpoint;
    std::uint64_t hash;
    bool operator==(const EngineBlock&) const = default;
  };
  struct EngineBlockHash {
    std::size_t operator()(const EngineBlock& b) const;
  };

  void store(std::size_t endpoint, const KvEvent& e);
  void remove(std::size_t endpoint, const KvEvent& e);
  void clear(std::size_t endpoint);
  void hold(std::size_t endpoint, std::uint64_t engine_hash, std::uint64_t key);
  void release(std::size_t endpoint, std::uint64_t key);
  void forget_oldest();

  std::size_t max_blocks_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::list<std::uint64_t> ages_;  // least recently stored last
  std::unordered_map<EngineBlock, std::uint64_t, EngineBlockHash> engine_keys_;
  std::uint64_t forgotten_ = 0;
  std::uint64_t unknown_ = 0;
};

}  // namespace sluice::datalayer
