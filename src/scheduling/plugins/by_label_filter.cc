#include "scheduling/plugins/by_label_filter.h"

#include <algorithm>

namespace sluice::scheduling {

bool ByLabelFilter::keeps(const Endpoint& e) const {
  auto it = e.labels.find(label_);
  if (it == e.labels.end()) return allows_no_label_;
  return valid_.find(it->second) != valid_.end();
}

void ByLabelFilter::filter(CycleState&, const Request&, std::vector<const Endpoint*>& candidates) {
  // The verdict is the endpoint's labels' alone: kept until they change.
  // Compacted in place over locals (the cache may call out to derive a
  // row, and through members every value is reloaded after such a call).
  auto derive = [this](const Endpoint& x) -> std::uint8_t { return keeps(x); };
  const auto pass = verdicts_.pass(derive);
  const std::size_t n = candidates.size();
  const Endpoint** cand = candidates.data();
  std::size_t kept = 0;
  std::size_t i = 0;
  // Every candidate is one of the view's: a loop without a call in it
  // (the compiler then keeps its values in registers), and the rest, if
  // any, the slow way.
  for (; i < n; ++i) {
    const Endpoint* e = cand[i];
    const std::uint8_t* v = pass.find(e);
    if (!v) [[unlikely]]
      break;
    cand[kept] = e;
    kept += *v;
  }
  for (; i < n; ++i) {
    const Endpoint* e = cand[i];
    cand[kept] = e;
    kept += verdicts_.get(*e, derive);
  }
  candidates.resize(kept);
}

}  // namespace sluice::scheduling
