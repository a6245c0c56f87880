// FlowTable: a band's flows by id, as one flat array.
//
// Open addressing with linear probing; each slot keeps the id's 64-bit hash
// beside the flow's address, so a probe reads the flow itself only when the
// hashes match, and a lookup at 50k flows costs about one cache miss for
// the slot and one for the flow (std::unordered_map<std::string, ...> costs
// a bucket, a node and the string). Deletion shifts the following entries
// back (no tombstones), so lookups never slow down with churn. The table
// owns its flows. The hash may be computed off the dispatcher thread
// (FlowTable::hash on the I/O thread) and passed in. Ids come from clients:
// the hash is seeded with a per-process secret, so nobody can choose ids
// that pile into one probe run (std::hash's fixed seed allowed exactly that
// against the std::unordered_map this replaces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "registry/huge_pages.h"

namespace sluice::registry {

class Flow;

class FlowTable {
 public:
  FlowTable() = default;
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;
  ~FlowTable();

  static std::uint64_t hash(std::string_view id);

  // The flow of `id` (whose hash is `h`), or null.
  Flow* find(std::string_view id, std::uint64_t h) const;
  Flow* find(std::string_view id) const { return find(id, hash(id)); }
  std::size_t count(std::string_view id) const { return find(id) ? 1 : 0; }
  // For prefetching: starts loading the slot a lookup of `h` reads first.
  void prefetch(std::uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask()]);
  }
  // For prefetching: the flow in the first slot of `h`'s probe run whose
  // hash is `h`, looking no further than that slot's cache line and
  // comparing no id, or null. A guess, right almost always.
  const Flow* guess(std::uint64_t h) const;
  // Takes ownership; `flow`'s id must not be in the table.
  Flow& insert(std::unique_ptr<Flow> flow, std::uint64_t h);
  // Destroys the flow of `id`, if any.
  bool erase(std::string_view id, std::uint64_t h);

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    Flow* flow = nullptr;  // null: empty
  };

 public:
  // Every flow, in no particular order. Do not insert or erase meanwhile.
  class iterator {
   public:
    Flow* operator*() const { return at_->flow; }
    iterator& operator++() {
      ++at_;
      skip();
      return *this;
    }
    bool operator!=(const iterator& o) const { return at_ != o.at_; }
    bool operator==(const iterator& o) const { return at_ == o.at_; }

   private:
    friend class FlowTable;
    iterator(const Slot* at, const Slot* end) : at_(at), end_(end) { skip(); }
    void skip() {
      while (at_ != end_ && !at_->flow) ++at_;
    }
    const Slot* at_;
    const Slot* end_;
  };
  iterator begin() const { return {slots_.data(), slots_.data() + slots_.size()}; }
  iterator end() const { return {slots_.data() + slots_.size(), slots_.data() + slots_.size()}; }

 private:
  void grow();
  std::size_t mask() const { return slots_.size() - 1; }

  HugeVector<Slot> slots_;  // a power of two; at most half full
  std::size_t size_ = 0;
};

}  // namespace sluice::registry
