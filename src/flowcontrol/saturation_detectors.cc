#include "flowcontrol/saturation_detectors.h"

#include <algorithm>
#include <limits>

namespace sluice::flowcontrol {

double UtilizationDetector::score(const EndpointLoad& e, TimePoint now) const {
  if (!e.has_metrics || now - e.metrics_time > p_.metrics_staleness_threshold)
    return std::numeric_limits<double>::infinity();
  const double queue = (e.waiting + e.dispatched_since_scrape) / p_.queue_depth_threshold;
  const double kv = e.kv_cache_usage / p_.kv_cache_util_threshold;
  return std::max(queue, kv);
}

bool UtilizationDetector::has_room(const EndpointLoad& e, TimePoint now) const {
  return score(e, now) < 1.0 + p_.headroom;
}

double UtilizationDetector::saturation(const std::vector<EndpointLoad>& pool, TimePoint now) const {
  if (pool.empty()) return 1.0;
  double sum = 0;
  for (const auto& e : pool) sum += std::min(score(e, now), 1.0 + p_.headroom);
  return sum / static_cast<double>(pool.size());
}

double ConcurrencyDetector::used(const EndpointLoad& e) const {
  return p_.tokens_mode ? static_cast<double>(e.in_flight_tokens)
                        : static_cast<double>(e.in_flight);
}

double ConcurrencyDetector::limit() const {
  return static_cast<double>(p_.tokens_mode ? p_.max_token_concurrency : p_.max_concurrency) *
         (1.0 + p_.headroom);
}

bool ConcurrencyDetector::has_room(const EndpointLoad& e, TimePoint) const {
  return used(e) < limit();
}

void ConcurrencyDetector::has_room_each(std::span<const EndpointLoad> pool, TimePoint,
                                        std::span<std::uint8_t> room) const {
  const double at_most = limit();
  for (std::size_t i = 0; i < pool.size(); ++i) room[i] = used(pool[i]) < at_most ? 1 : 0;
}

double ConcurrencyDetector::saturation(const std::vector<EndpointLoad>& pool, TimePoint) const {
  if (pool.empty()) return 1.0;
  double used = 0, capacity = 0;
  for (const auto& e : pool) {
    used += p_.tokens_mode ? static_cast<double>(e.in_flight_tokens) : e.in_flight;
    capacity += static_cast<double>(p_.tokens_mode ? p_.max_token_concurrency : p_.max_concurrency);
  }
  return capacity > 0 ? used / capacity : 1.0;
}

}  // namespace sluice::flowcontrol
