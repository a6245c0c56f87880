#include "flowcontrol/displacement_policies.h"

namespace sluice::flowcontrol {

std::vector<std::uint64_t> LowestBandNewestFirst::choose(const DisplacementView& view, int priority,
                                                         std::uint64_t need_requests,
                                                         std::uint64_t need_bytes) {
  std::vector<std::uint64_t> victims;
  std::uint64_t requests = 0, bytes = 0;
  view.for_each_lower(priority, [&](const QueuedRequest& r, int) {
    if (requests >= need_requests && bytes >= need_bytes) return false;
    victims.push_back(r.id);
    requests += 1;
    bytes += r.byte_size;
    return true;
  });
  if (requests < need_requests || bytes < need_bytes) victims.clear();
  return victims;
}

}  // namespace sluice::flowcontrol
