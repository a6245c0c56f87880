#include "scheduling/least_in_flight.h"

namespace sluice::scheduling {

int pick_least_in_flight(const datalayer::EndpointSet& endpoints, const std::vector<bool>& excluded,
                         datalayer::Clock::time_point now, std::uint32_t& rotation) {
  const std::size_t n = endpoints.size();
  if (n == 0) return -1;
  const std::size_t start = rotation++ % n;
  int best = -1;
  int best_load = 0;
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t i = (start + k) % n;
    if (i < excluded.size() && excluded[i]) continue;
    const auto& ep = endpoints.at(i);
    if (!ep.usable(now)) continue;
    int load = ep.in_flight.load(std::memory_order_relaxed);
    if (best < 0 || load < best_load) {
      best = static_cast<int>(i);
      best_load = load;
    }
  }
  return best;
}

}  // namespace sluice::scheduling
