// approx-prefix-cache-producer: what sluice believes each endpoint holds in
// its prefix cache, learned from its own routing (no engine events needed):
// after a request is dispatched, its prefix blocks are recorded as cached on
// the endpoints that serve it; each endpoint keeps an LRU of at most
// lruCapacityPerServer blocks. The prefix-cache-scorer reads the index; the
// prefix-based-pd-decider reads the match the scorer leaves in the cycle.
//
// The hashing itself runs on the I/O thread (prefix_hasher.h) with this
// plugin's blockSizeTokens and maxPrefixTokensToMatch (or the deprecated
// maxPrefixBlocksToMatch).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

// maxPrefixTokensToMatch / maxPrefixBlocksToMatch 0 (both): every full
// block of the prompt; the prompt is bounded by the request body limit.
inline constexpr std::uint32_t kUnlimitedPrefixBlocks = UINT32_MAX;

struct PrefixParams {
  std::uint32_t block_size_tokens = 16;
  // The cap on hashed blocks: maxPrefixTokensToMatch / blockSizeTokens when
  // that is given (it wins, as in llm-d), else maxPrefixBlocksToMatch.
  std::uint32_t max_prefix_blocks_to_match = 256;
  std::uint32_t lru_capacity_per_server = 31250;
};

// The match of one request against the index: consecutive leading blocks
// cached per endpoint slot (only slots with at least one).
struct PrefixMatch {
  std::size_t total_blocks = 0;                                  // hashed blocks of the request
  std::vector<std::pair<std::uint32_t, std::uint32_t>> matched;  // (endpoint slot, blocks)
  std::uint32_t blocks_on(std::uint32_t slot) const {
    for (const auto& [s, b] : matched)
      if (s == slot) return b;
    return 0;
  }
};

// Block hash -> the endpoints holding it, as one flat array: open
// addressing with linear probing and backward-shift deletion, up to three
// holders inline in the entry (one cache line; a block is rarely on more
// endpoints), more in a vector. Prompts come from clients and the block
// hashes are not secret: the slot is taken from the hash mixed with a
// per-process secret, so no one can make blocks that pile into one run.
class BlockHolders {
 public:
  struct Holder {
    std::uint32_t slot, node;
  };
  struct Entry {
    std::uint64_t hash = 0;
    std::uint32_t n = 0;  // holders
    bool used = false;    // false: an empty slot
    Holder small[3]{};
    std::vector<Holder> more;  // holders past the third
    Holder& at(std::uint32_t i) { return i < 3 ? small[i] : more[i - 3]; }
    const Holder& at(std::uint32_t i) const { return i < 3 ? small[i] : more[i - 3]; }
    void push(Holder h);
    void erase(std::uint32_t i);  // the last one takes its place
  };

  BlockHolders();
  // The entry of `hash` (it has at least one holder), or null.
  Entry* find(std::uint64_t hash);
  const Entry* find(std::uint64_t hash) const;
  // The entry of `hash`, made (with no holder yet) if missing. Valid until
  // the next insert or erase.
  Entry& get_or_insert(std::uint64_t hash);
  // Removes the entry of `hash` (call when its last holder is gone).
  void erase(std::uint64_t hash);
  std::size_t size() const { return size_; }
  // Starts loading the line `hash` would be found on: a request's blocks
  // are known up front, so their (random) lines can be fetched in parallel
  // instead of one miss after another.
  void prefetch(std::uint64_t hash) const {
    if (!entries_.empty()) __builtin_prefetch(&entries_[home(hash)]);
  }

 private:
  std::size_t home(std::uint64_t hash) const {
    return static_cast<std::size_t>(((hash ^ seed_) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();
  std::vector<Entry> entries_;  // a power of two, at most half full
  std::size_t size_ = 0;
  unsigned shift_ = 64;
  std::uint64_t seed_;
};

class PrefixIndex {
 public:
  explicit PrefixIndex(std::uint32_t capacity_per_endpoint) : capacity_(capacity_per_endpoint) {}

  // Longest cached leading run of `hashes` per endpoint; `out` is filled
  // (slots with a match of at least one block). `hashes` is a chain (each
  // block's hash covers every block before it, prefix_hasher.h), so what an
  // endpoint holds of it is a leading run: whenever block k was recorded so
  // was every block before it, and later (more recently used), so its LRU
  // evicts a chain from the tail. The match therefore bisects: the slots
  // holding the last block hold all of it, and only where the holders of
  // two blocks differ is the interval between them looked into — two
  // lookups for a prompt one endpoint holds whole, not one per block.
  void match(std::span<const std::uint64_t> hashes, PrefixMatch& out);
  // Records `hashes` as cached on endpoint `slot` (most recent use).
  void insert(std::uint32_t slot, std::span<const std::uint64_t> hashes);
  // Forgets an endpoint (removed from the pool).
  void forget(std::uint32_t slot);

  std::size_t blocks_on(std::uint32_t slot) const {
    return slot < lrus_.size() ? lrus_[slot].size : 0;
  }
  std::size_t distinct_blocks() const { return holders_.size(); }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Node {
    std::uint64_t hash = 0;
    std::uint32_t prev = kNone, next = kNone;  // towards MRU / LRU
  };
  struct Lru {
    std::vector<Node> nodes;
    std::vector<std::uint32_t> free;
    std::uint32_t head = kNone, tail = kNone;  // MRU, LRU
    std::size_t size = 0;
  };
  using Holder = BlockHolders::Holder;
  void unlink(Lru& l, std::uint32_t n);
  void push_front(Lru& l, std::uint32_t n);
  void drop_holder(std::uint64_t hash, std::uint32_t slot);

  std::uint32_t capacity_;
  std::vector<Lru> lrus_;  // by endpoint slot
  // Block hash -> the endpoints holding it (usually a handful).
  BlockHolders holders_;
  // The slots in [first, last) hold block `a` of `hashes`; sets each
  // one's run, its last held block being in [a, b].
  void resolve(std::span<const std::uint64_t> hashes, std::size_t a, std::size_t b,
               std::size_t first, std::size_t last);
  // Moves the slots in [first, last) that `e` holds to the front; returns
  // the end of those.
  std::size_t partition_held(const BlockHolders::Entry* e, std::size_t first, std::size_t last);
  std::vector<std::uint32_t> run_;      // scratch: match length per slot
  std::vector<std::uint8_t> marked_;    // scratch: slots of one entry
  std::vector<std::uint32_t> touched_;  // scratch: the slots being resolved
};

class ApproxPrefixCacheProducer final : public Plugin, public RequestLifecycle {
 public:
  static constexpr std::string_view kType = "approx-prefix-cache-producer";
  explicit ApproxPrefixCacheProducer(PrefixParams p)
      : params_(p), index_(p.lru_capacity_per_server) {}
  std::string_view type() const override { return kType; }

  const PrefixParams& params() const { return params_; }
  PrefixIndex& index() { return index_; }
  // Where the prefix-cache-scorer leaves the request's match.
  const CycleKey<PrefixMatch>& match_key() const { return match_key_; }
  // The request's match against the index, computed once per cycle by
  // whichever plugin asks first (dispatcher thread).
  const PrefixMatch& match(CycleState& cycle, const Request& request) {
    PrefixMatch* m = cycle.get(match_key_);
    if (!m) {
      m = &cycle.put(match_key_);
      index_.match(request.prefix_hashes, *m);
    }
    return *m;
  }
  // A plugin reads the match after dispatch (inflight-load-producer): the
  // match is then taken before this request's blocks are recorded.
  void keep_match_for_lifecycle() { keep_match_ = true; }

  // Records the request's blocks on every endpoint that serves it (the
  // primary target of each profile: decode and, in P/D, prefill).
  void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) override;

 private:
  PrefixParams params_;
  PrefixIndex index_;
  CycleKey<PrefixMatch> match_key_;
  bool keep_match_ = false;
};

PrefixParams read_prefix_params(PluginParams& params);

}  // namespace sluice::scheduling
