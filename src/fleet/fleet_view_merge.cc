#include "fleet/fleet_view_merge.h"

#include <algorithm>

namespace sluice::fleet {

using flowcontrol::FleetBandBacklog;
using flowcontrol::FleetEndpointLoad;
using flowcontrol::FleetInbound;

void ServiceLedger::read(const std::string& replica, const std::string& incarnation,
                         std::vector<std::pair<std::string, double>> table, ServiceDeltas& deltas) {
  Seen& seen = seen_[replica];
  if (seen.incarnation != incarnation) {
    // New, or restarted: everything it reports is new service.
    seen.incarnation = incarnation;
    seen.service.clear();
  }
  std::unordered_map<std::string, double> now_seen;
  for (auto& [key, value] : table) {
    const auto it = seen.service.find(key);
    const double before = it == seen.service.end() ? 0 : it->second;
    if (value > before) deltas[key] += value - before;
    now_seen[std::move(key)] = std::max(value, before);
  }
  seen.service = std::move(now_seen);
}

FleetInbound merge_fleet_view(const std::string& self, const std::vector<ReplicaReport>& others,
                              const ServiceDeltas& service) {
  FleetInbound in;
  // Ordered maps: the view lists endpoints by address and bands by priority.
  std::map<std::string, FleetEndpointLoad> endpoints;
  std::map<int, FleetBandBacklog> backlog;
  for (const auto& r : others) {
    const bool before = r.id < self;
    for (const auto& e : r.endpoints) {
      // Bounded as each replica's own fields are when read: sums of
      // Redis's numbers never wrap.
      auto& sum = endpoints[e.address];
      sum.address = e.address;
      sum.in_flight = std::min<std::uint64_t>(sum.in_flight + e.in_flight, 1u << 24);
      sum.dispatched_since_scrape = std::min<std::uint64_t>(
          sum.dispatched_since_scrape + e.dispatched_since_scrape, 1u << 24);
      sum.in_flight_tokens = std::min<std::uint64_t>(sum.in_flight_tokens + e.in_flight_tokens,
                                                     std::uint64_t{1} << 40);
    }
    in.queued += r.queued;
    for (const auto& b : r.backlog) {
      FleetBandBacklog& sum = backlog[b.priority];
      sum.priority = b.priority;
      sum.queued += b.queued;
      if (before) sum.queued_before += b.queued;
      if (b.has_counter && (!sum.has_counter || b.min_counter < sum.min_counter)) {
        sum.has_counter = true;
        sum.min_counter = b.min_counter;
      }
    }
    if (before) {
      ++in.rank;
      in.queued_before += r.queued;
    }
  }
  for (auto& [a, e] : endpoints) in.endpoints.push_back(std::move(e));
  for (const auto& [prio, b] : backlog) in.backlog.push_back(b);
  in.service.assign(service.begin(), service.end());
  in.replicas = static_cast<std::uint32_t>(others.size());
  return in;
}

}  // namespace sluice::fleet
