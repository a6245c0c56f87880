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
  verdicts_.keep_if(
      candidates, [this](const Endpoint& x) -> std::uint8_t { return keeps(x); },
      [](std::uint8_t v) { return v != 0; });
}

}  // namespace sluice::scheduling
