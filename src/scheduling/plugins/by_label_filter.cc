#include "scheduling/plugins/by_label_filter.h"

#include <algorithm>

namespace sluice::scheduling {

void ByLabelFilter::filter(CycleState&, const Request&, std::vector<const Endpoint*>& candidates) {
  std::erase_if(candidates, [&](const Endpoint* e) {
    auto it = e->labels.find(label_);
    if (it == e->labels.end()) return !allows_no_label_;
    return valid_.find(it->second) == valid_.end();
  });
}

}  // namespace sluice::scheduling
