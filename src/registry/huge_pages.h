// Memory for the dispatcher's large, randomly read structures (the item
// pool, the flows, each band's flow table, VTC's heap and per-flow state),
// backed by transparent huge pages.
//
// At 50 000 flows a decision reads a handful of random lines out of tens of
// megabytes. With 4 KB pages nearly every one of those reads also misses
// the TLB and walks the page table: on the 2-core test host a random read
// in a 16 MB working set took 57 ns with 4 KB pages and 28 ns with 2 MB
// ones (a pointer chase, pinned). So these structures take their memory in
// 2 MB-aligned mappings advised MADV_HUGEPAGE, which the kernel honours
// when transparent huge pages are `always` or `madvise` (Debian's default)
// and ignores otherwise (the memory then behaves as any other).
//
// Under AddressSanitizer everything goes through the ordinary allocator
// instead: its redzones and use-after-free checks cover these objects, and
// LeakSanitizer does not scan private mappings for the pointers they hold.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace sluice::registry {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kHugePages = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kHugePages = false;
#else
inline constexpr bool kHugePages = true;
#endif
#else
inline constexpr bool kHugePages = true;
#endif

// Bytes currently mapped by huge_allocate, for the memory benchmarks (which
// otherwise count what malloc reports).
inline std::atomic<std::size_t>& huge_bytes_mapped() {
  static std::atomic<std::size_t> bytes{0};
  return bytes;
}

// Whether the mappings are advised MADV_HUGEPAGE: yes unless the
// environment has SLUICE_HUGE_PAGES=0 (for a host where the kernel's
// synchronous compaction on a huge-page fault, `defrag` = madvise, would
// stall the dispatcher; the mappings are then ordinary 4 KB pages).
inline bool huge_pages_advised() {
  static const bool advised = [] {
    const char* v = std::getenv("SLUICE_HUGE_PAGES");
    return !(v && v[0] == '0' && v[1] == '\0');
  }();
  return advised;
}

inline std::size_t huge_round(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
}

// `bytes` rounded up to a multiple of 2 MB, 2 MB-aligned, zero-filled.
// Throws std::bad_alloc when the mapping fails.
inline void* huge_allocate(std::size_t bytes) {
  const std::size_t size = huge_round(bytes);
  // Over-map by one huge page and trim, for the alignment.
  void* raw = ::mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t tail = start + size + kHugePageBytes - (aligned + size);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice: a kernel without THP, or with it `never`, ignores it.
  if (huge_pages_advised()) ::madvise(p, size, MADV_HUGEPAGE);
  huge_bytes_mapped().fetch_add(size, std::memory_order_relaxed);
  return p;
}

inline void huge_deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t size = huge_round(bytes);
  ::munmap(p, size);
  huge_bytes_mapped().fetch_sub(size, std::memory_order_relaxed);
}

// For std::vector: blocks of at least half a huge page come from
// huge_allocate, smaller ones from the ordinary allocator (a small table
// should not cost 2 MB).
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  static bool huge(std::size_t n) { return kHugePages && n * sizeof(T) >= kHugePageBytes / 2; }
  T* allocate(std::size_t n) {
    if (huge(n)) return static_cast<T*>(huge_allocate(n * sizeof(T)));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (huge(n))
      huge_deallocate(p, n * sizeof(T));
    else
      std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

// Fixed-size slots for objects of `Size` bytes, carved from 2 MB huge-page
// blocks: objects made and dropped at random (a band's flows) end up packed
// on a few huge pages instead of spread over the malloc heap. A new object
// takes the free slot of lowest address in the earliest block, so after
// churn (a registry that held 50 000 flows and now holds 1 000, or one
// destroyed and made again) the live objects stay together at the front
// of the pool; a LIFO free list would scatter them over every block it
// ever mapped (measured: 6-10% fewer decisions/s at 1 000 flows after a
// run at 50 000). Blocks are kept for the process's life: what the pool
// holds is bounded by the peak number of live objects (for flows, by
// flowControl.maxFlows). Thread-safe (a mutex: flows are made and dropped
// far less often than they are read). Under ASan, the ordinary allocator.
template <std::size_t Size, std::size_t Align>
class SlotPool {
 public:
  static SlotPool& instance() {
    static SlotPool* pool = new SlotPool;  // never destroyed: used until exit
    return *pool;
  }
  void* allocate() {
    if constexpr (!kHugePages) {
      return ::operator new (Size, std::align_val_t{Align});
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      while (first_free_ < blocks_.size() && blocks_[first_free_].free == 0) ++first_free_;
      if (first_free_ == blocks_.size()) map_block();
      Block& b = blocks_[first_free_];
      std::size_t w = 0;
      while (b.bits[w] == 0) ++w;
      const std::size_t slot = w * 64 + static_cast<std::size_t>(__builtin_ctzll(b.bits[w]));
      b.bits[w] &= b.bits[w] - 1;
      --b.free;
      ++in_use_;
      return b.base + slot * kStride;
    }
  }
  void deallocate(void* p) noexcept {
    if constexpr (!kHugePages) {
      ::operator delete (p, std::align_val_t{Align});
    } else {
      if (!p) return;
      std::lock_guard<std::mutex> lock(mu_);
      const auto at = reinterpret_cast<std::uintptr_t>(p);
      const auto base = at & ~(kHugePageBytes - 1);
      // The block's index is kept in its first bytes, before the slots.
      const std::uint32_t index = *reinterpret_cast<const std::uint32_t*>(base);
      Block& b = blocks_[index];
      const std::size_t slot = (at - reinterpret_cast<std::uintptr_t>(b.base)) / kStride;
      const std::uint64_t bit = std::uint64_t{1} << (slot % 64);
      assert(!(b.bits[slot / 64] & bit) && "slot freed twice");
      b.bits[slot / 64] |= bit;
      ++b.free;
      --in_use_;
      if (index < first_free_) first_free_ = index;
    }
  }
  // Bytes of the slots handed out and not given back (0 under ASan).
  std::size_t in_use_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_ * kStride;
  }
  // Bytes of the huge pages mapped for slots (counted in huge_bytes_mapped).
  std::size_t mapped_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return blocks_.size() * kHugePageBytes;
  }

 private:
  static constexpr std::size_t kStride = (Size + Align - 1) / Align * Align;
  // The block's index, then the slots from the first multiple of Align.
  static constexpr std::size_t kHeader = (sizeof(std::uint32_t) + Align - 1) / Align * Align;
  static constexpr std::size_t kSlots = (kHugePageBytes - kHeader) / kStride;
  static constexpr std::size_t kWords = (kSlots + 63) / 64;
  static_assert(Align > 0 && (Align & (Align - 1)) == 0 && Align <= 4096);
  static_assert(kSlots > 0);
  struct Block {
    char* base;  // the first slot
    std::size_t free;
    std::uint64_t bits[kWords];  // 1: free
  };
  void map_block() {
    auto* page = static_cast<char*>(huge_allocate(kHugePageBytes));
    *reinterpret_cast<std::uint32_t*>(page) = static_cast<std::uint32_t>(blocks_.size());
    Block b{page + kHeader, kSlots, {}};
    for (std::size_t w = 0; w < kWords; ++w) {
      const std::size_t n = kSlots - w * 64 < 64 ? kSlots - w * 64 : 64;
      b.bits[w] = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
    }
    try {
      blocks_.push_back(b);
    } catch (...) {
      huge_deallocate(page, kHugePageBytes);
      throw;
    }
  }
  std::mutex mu_;
  std::vector<Block> blocks_;
  std::size_t first_free_ = 0;  // no block before this one has a free slot
  std::size_t in_use_ = 0;
};

}  // namespace sluice::registry
