// SlotHeap: an indexed 4-ary min-heap of fairness policies' entries, each
// naming a flow slot, in one array (on huge pages from 1 MB on).
//
// An entry carries a copy of its flow's order key, so that comparisons
// read only the heap; `Place(slot, pos)` is told each entry's new position
// (kNotInHeap once it leaves), so that the policy can find a flow's entry
// when its key changes. O(log F) per change, touching a few contiguous
// entries per level (a std::set of 50 000 flows costs a node allocation
// and a dozen scattered lines per change).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "registry/huge_pages.h"

namespace sluice::flowcontrol {

template <class Entry, class Less, class Place>
class SlotHeap {
 public:
  static constexpr std::uint32_t kNotInHeap = UINT32_MAX;

  SlotHeap(Less less, Place place) : less_(less), place_(place) {}

  std::size_t size() const { return heap_.size(); }
  bool empty() const { return heap_.empty(); }
  const Entry& top() const { return heap_.front(); }
  const Entry& operator[](std::uint32_t pos) const { return heap_[pos]; }
  // For changing an entry's key in place; update(pos) afterwards.
  Entry& operator[](std::uint32_t pos) { return heap_[pos]; }

  void push(const Entry& e) {
    heap_.push_back(e);
    const auto pos = static_cast<std::uint32_t>(heap_.size() - 1);
    place_(e.slot, pos);
    sift_up(pos);
  }
  void erase(std::uint32_t pos) {
    place_(heap_[pos].slot, kNotInHeap);
    const Entry last = heap_.back();
    heap_.pop_back();
    if (pos == heap_.size()) return;
    put(pos, last);
    update(pos);
  }
  // After the key of the entry at `pos` changed.
  void update(std::uint32_t pos) {
    if (pos > 0 && less_(heap_[pos], heap_[(pos - 1) / 4]))
      sift_up(pos);
    else
      sift_down(pos);
  }
  void clear() {
    for (const Entry& e : heap_) place_(e.slot, kNotInHeap);
    heap_.clear();
  }

  // The positions of the `max` smallest entries (at most 32), smallest
  // first: a best-first walk from the root, its frontier kept as a small
  // binary heap of positions. Costs the heap's top levels, in cache.
  std::size_t smallest(std::uint32_t* out, std::size_t max) const {
    constexpr std::size_t kMax = 32;
    max = std::min(max, kMax);
    if (max == 0 || heap_.empty()) return 0;
    std::uint32_t frontier[kMax * 3 + 1];
    std::size_t size = 0;
    auto later = [this](std::uint32_t a, std::uint32_t b) { return less_(heap_[b], heap_[a]); };
    frontier[size++] = 0;
    std::size_t n = 0;
    while (n < max && size > 0) {
      std::pop_heap(frontier, frontier + size, later);
      const std::uint32_t pos = frontier[--size];
      out[n++] = pos;
      const std::size_t first = std::size_t{pos} * 4 + 1;
      const std::size_t last = std::min(first + 4, heap_.size());
      for (std::size_t c = first; c < last && size < std::size(frontier); ++c) {
        frontier[size++] = static_cast<std::uint32_t>(c);
        std::push_heap(frontier, frontier + size, later);
      }
    }
    return n;
  }

 private:
  void put(std::uint32_t pos, const Entry& e) {
    heap_[pos] = e;
    place_(e.slot, pos);
  }
  void sift_up(std::uint32_t pos) {
    const Entry e = heap_[pos];
    while (pos > 0) {
      const std::uint32_t parent = (pos - 1) / 4;
      if (!less_(e, heap_[parent])) break;
      put(pos, heap_[parent]);
      pos = parent;
    }
    put(pos, e);
  }
  // Bottom-up: the smallest children move up all the way to a leaf
  // without comparing them with the entry (which, raised, usually belongs
  // near the bottom), then the entry rises from there to its place.
  void sift_down(std::uint32_t pos) {
    const Entry e = heap_[pos];
    const std::uint32_t start = pos;
    const std::size_t n = heap_.size();
    for (;;) {
      const std::size_t first = std::size_t{pos} * 4 + 1;
      if (first >= n) break;
      prefetch_grandchildren(first, n);
      const std::size_t best = smallest_child(first, n);
      put(pos, heap_[best]);
      pos = static_cast<std::uint32_t>(best);
    }
    while (pos > start) {
      const std::uint32_t parent = (pos - 1) / 4;
      if (!less_(e, heap_[parent])) break;
      put(pos, heap_[parent]);
      pos = parent;
    }
    put(pos, e);
  }

  // Starts loading the children of the four entries from `first` on (the
  // 16 from first * 4 + 1, six or seven cache lines): the next level of a
  // sift-down, whichever child wins, so that its misses overlap this
  // level's. With the selects below: vtc's pass +5% at 50 000 flows, +7%
  // at 10 000 (5 interleaved pinned pairs); without them it measured
  // within noise.
  void prefetch_grandchildren(std::size_t first, std::size_t n) const {
    const std::size_t from = first * 4 + 1;
    if (from >= n) return;
    const char* p = reinterpret_cast<const char*>(heap_.data() + from);
    const std::size_t bytes = (std::min(from + 16, n) - from) * sizeof(Entry);
    for (std::size_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at);
    __builtin_prefetch(p + bytes - 1);  // the last line, when `from` is not at a line's start
  }

  // The smallest of the (up to four) children from `first` on. A Less
  // that declares itself branch-free (kBranchFree) gets four, the usual
  // case, as a tournament of selects that compiles to conditional moves:
  // a branch on keys the predictor cannot guess costs a miss on most
  // levels (vtc: +20% decisions at 1 000 flows). A Less with branches of
  // its own keeps the loop, which measured faster for global-strict, whose
  // keys (arrival order) the predictor guesses well.
  std::size_t smallest_child(std::size_t first, std::size_t n) const {
    if constexpr (requires { requires Less::kBranchFree; }) {
      if (first + 4 <= n) {
        const Entry* c = &heap_[first];
        // Arithmetic on the comparisons' results: written as `?:`, gcc 12
        // turns two of the three back into branches.
        const std::size_t a = static_cast<std::size_t>(less_(c[1], c[0]));
        const std::size_t b = 2 + static_cast<std::size_t>(less_(c[3], c[2]));
        const std::size_t take_b = static_cast<std::size_t>(less_(c[b], c[a]));
        return first + (a ^ ((a ^ b) & (0 - take_b)));
      }
    }
    std::size_t best = first;
    const std::size_t last = std::min(first + 4, n);
    for (std::size_t c = first + 1; c < last; ++c)
      if (less_(heap_[c], heap_[best])) best = c;
    return best;
  }

  Less less_;
  Place place_;
  registry::HugeVector<Entry> heap_;
};

}  // namespace sluice::flowcontrol
