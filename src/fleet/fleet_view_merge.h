// The merge of the other replicas' state into one replica's fleet view,
// apart from Redis: FleetSync (fleet_sync.h) reads the state and calls
// these; the fleet simulator (test/sim/fleet_sim_test.cc) calls the same,
// so what it checks is the aggregation replicas run, not a copy of it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flowcontrol/fleet_view.h"

namespace sluice::fleet {

// One other live replica's state as it published it (its P:r:R hash).
struct ReplicaReport {
  std::string id;
  std::uint64_t queued = 0;  // requests queued there
  std::vector<flowcontrol::FleetEndpointLoad> endpoints;
  // Per band: queued there and the smallest counter backlogged there
  // (queued_before is not read).
  std::vector<flowcontrol::FleetBandBacklog> backlog;
};

// Service given to each flow (by flow key) since the last view, summed
// over the other replicas.
using ServiceDeltas = std::unordered_map<std::string, double>;

// What a reader has seen of each other replica's cumulative service table
// (P:s:R): each reading yields only what grew since the last one of the same
// replica and incarnation, so service is charged once. A restarted replica
// (another incarnation) counts from zero again: its table starts over.
class ServiceLedger {
 public:
  // `table` is the replica's table as read now, whole (flow key ->
  // cumulative service); a flow missing from it is forgotten. A value
  // below the one seen is kept at the one seen (no negative service).
  void read(const std::string& replica, const std::string& incarnation,
            std::vector<std::pair<std::string, double>> table, ServiceDeltas& deltas);
  // The replica is no longer followed: what was seen of it goes.
  void forget(const std::string& replica) { seen_.erase(replica); }
  bool follows(const std::string& replica) const { return seen_.count(replica) != 0; }

 private:
  struct Seen {
    std::string incarnation;
    std::unordered_map<std::string, double> service;
  };
  std::map<std::string, Seen> seen_;
};

// The view replica `self` gets from the others' reports (each replica at
// most once): endpoint work summed per address (capped as FleetSync caps
// it), queued requests summed, per band the queued summed and the smallest
// counter backlogged anywhere, its rank among all live replicas in id order
// and the demand queued on those before it; `service` as the view's service.
flowcontrol::FleetInbound merge_fleet_view(const std::string& self,
                                           const std::vector<ReplicaReport>& others,
                                           const ServiceDeltas& service);

}  // namespace sluice::fleet
