// What a plugin derives from an endpoint's labels (a filter's verdict, a
// parsed range, interned topology values), kept per endpoint and derived
// again only when labels change. Labels are a map of strings: a lookup
// costs 20-30 ns, so a plugin that looked its label up per endpoint per
// cycle spent 10-20 us a cycle at 512 endpoints on what changes only when
// the pool does.
//
// Inside a scheduler (attached to its PoolView) the values are one dense
// row per endpoint of the cycle's array, all derived again when the view's
// labels_epoch changes (a pool change): a pass (pass()) then finds a
// candidate's value by its address, with neither a read of its record nor
// a call. Alone (a plugin called by a test), get() keeps values by the
// endpoint's slot, checked against its labels_version. Bounded by the
// pool's size. Dispatcher thread only, as the plugins that own one.
#pragma once

#include <cstdint>
#include <vector>

#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

template <class T>
class LabelCache {
 public:
  void attach(const PoolView* view) {
    view_ = view;
    dense_.clear();
    epoch_ = 0;
  }

  // This cycle's values, for a loop over candidates: find(e) is the value
  // of an endpoint of the view (null for any other, and for every endpoint
  // when not attached: get() then).
  struct Pass {
    const Endpoint* base = nullptr;
    const T* rows = nullptr;
    std::size_t bytes = 0;  // the view's size x sizeof(Endpoint)
    const T* find(const Endpoint* e) const {
      const std::uintptr_t d =
          reinterpret_cast<std::uintptr_t>(e) - reinterpret_cast<std::uintptr_t>(base);
      return d < bytes ? rows + d / sizeof(Endpoint) : nullptr;
    }
  };
  template <class Derive>
  Pass pass(Derive&& derive) {
    if (!view_) return {};
    if (epoch_ != view_->labels_epoch || dense_.size() != view_->size) [[unlikely]]
      derive_all(derive);
    return Pass{view_->base, dense_.data(), view_->size * sizeof(Endpoint)};
  }

  // One endpoint's value, in a pass's stead (alone, or outside the view).
  // `derive(const Endpoint&) -> T`. The value must not point into the
  // endpoint (its record moves when the pool grows).
  template <class Derive>
  const T& get(const Endpoint& e, Derive&& derive) {
    if (view_) {
      const Pass p = pass(derive);
      if (const T* v = p.find(&e)) return *v;
      loose_ = derive(e);
      return loose_;
    }
    if (e.index >= rows_.size()) rows_.resize(e.index + 1);
    Row& r = rows_[e.index];
    if (!r.filled || r.version != e.labels_version) {
      r.value = derive(e);
      r.version = e.labels_version;
      r.filled = true;
    }
    return r.value;
  }
  // A filter's pass: keeps, in order, the candidates whose value passes
  // `keep(const T&) -> bool`. The view's rows are read in a loop with no
  // call in it (the compiler then keeps its values in registers; with the
  // slow path inside, it spilled them around it); a candidate outside the
  // view ends that loop, and it and the rest go the slow way.
  template <class Derive, class Keep>
  void keep_if(std::vector<const Endpoint*>& candidates, Derive&& derive, Keep&& keep) {
    const Pass p = pass(derive);
    const std::size_t n = candidates.size();
    const Endpoint** cand = candidates.data();
    std::size_t kept = 0;
    std::size_t i = 0;
    for (; i < n; ++i) {
      const Endpoint* e = cand[i];
      const T* v = p.find(e);
      if (!v) [[unlikely]]
        break;
      cand[kept] = e;
      kept += keep(*v);  // no branch: written, then kept or overwritten
    }
    for (; i < n; ++i) {
      const Endpoint* e = cand[i];
      cand[kept] = e;
      kept += keep(get(*e, derive));
    }
    candidates.resize(kept);
  }

  // Forget everything (the next pass or get derives again).
  void clear() {
    rows_.clear();
    dense_.clear();
  }
  std::size_t slots() const { return view_ ? dense_.size() : rows_.size(); }

 private:
  // Out of line: taken once per pool change.
  template <class Derive>
  [[gnu::noinline]] void derive_all(Derive& derive) {
    dense_.resize(view_->size);
    for (std::size_t i = 0; i < view_->size; ++i) dense_[i] = derive(view_->base[i]);
    epoch_ = view_->labels_epoch;
  }

  struct Row {
    std::uint64_t version = 0;  // the labels_version it was derived from
    bool filled = false;
    T value{};
  };
  const PoolView* view_ = nullptr;
  std::uint64_t epoch_ = 0;
  std::vector<T> dense_;   // attached: by position in the view
  std::vector<Row> rows_;  // alone: by slot
  T loose_{};
};

}  // namespace sluice::scheduling
