// What the controller exchanges with the fleet's sync thread once per sync
// interval (src/fleet/fleet_sync.h), on the dispatcher thread: the other
// replicas' merged state in, this replica's own state out. Plain data: the
// controller never waits on Redis, it only applies the last view it was given.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/flowcontrol/types.h"

namespace sluice::flowcontrol {

struct FleetSettings {
  bool enabled = false;
  // A band's picked flow waits while its VTC counter exceeds the smallest
  // counter backlogged in that band on another replica by more than this...
  double fairness_slack = 2048;
  // ...but never longer than this while an endpoint has room.
  Duration max_hold = std::chrono::milliseconds(100);
};

// Work on one endpoint (by address: every replica names the pool alike).
struct FleetEndpointLoad {
  std::string address;
  std::uint32_t in_flight = 0;
  std::uint32_t dispatched_since_scrape = 0;
  std::uint64_t in_flight_tokens = 0;
};

// A band's backlog: requests queued in it and, with a fairness policy that
// has a fleet-wide standing (VTC), the smallest counter among its
// backlogged flows. In an inbound view: summed (queued, and queued on the
// replicas ranked before this one) and the smallest (counter) over the others.
struct FleetBandBacklog {
  int priority = 0;
  double min_counter = 0;
  bool has_counter = false;
  std::uint64_t queued = 0;
  std::uint64_t queued_before = 0;
};

// The flow key in the fleet's tables: "<priority> <fairness id>" (ids hold
// no spaces: protocol/steering.h).
std::string fleet_flow_key(int priority, const std::string& id);

struct FleetInbound {
  // Summed over the other live replicas. Replaces the previous view: an
  // endpoint not listed has no remote work.
  std::vector<FleetEndpointLoad> endpoints;
  // Service (priced tokens, before weights) the other replicas gave each
  // flow since the last view: charged to the flow's fairness as if served here.
  std::vector<std::pair<std::string, double>> service;
  // The smallest counter backlogged on any other live replica, by band.
  std::vector<FleetBandBacklog> backlog;
  // Requests queued on the other replicas: the pool's free room is split
  // with them until the next view (see Controller::exchange_fleet).
  std::uint64_t queued = 0;
  // The other live replicas: a burst can reach each of them in the same
  // interval, so at most a 1/(replicas+1) part of the room seen free is
  // taken before the next view.
  std::uint32_t replicas = 0;
  // This replica's place among all live ones (ids in order, 0-based): who
  // takes the odd request when the room does not split evenly, and which
  // endpoints each leaves to the others, so that they do not all pick the same.
  std::uint32_t rank = 0;
  // Requests queued on the replicas before this one in that order: each
  // replica's part of the room is a slice of one line cut at the same
  // places by all, so the parts add up to the room.
  std::uint64_t queued_before = 0;
  // False until the replica has read the fleet once (or given up after a
  // lease): it dispatches nothing before, so that one joining a busy fleet
  // does not take the whole pool for its first interval.
  bool ready = true;
  // Every other replica in the view has published since the last view that
  // said so. A view that repeats a report (a replica slow to sync, one dead
  // until its lease runs out, this replica's own failed round) says false:
  // the room this replica left the others is still theirs (they may have
  // taken it without telling yet), see Controller::exchange_fleet.
  bool advanced = true;
};

struct FleetOutbound {
  std::vector<FleetEndpointLoad> endpoints;             // this replica's own work
  std::vector<std::pair<std::string, double>> service;  // given since the last exchange
  std::vector<FleetBandBacklog> backlog;                // this replica's, by band
  std::uint64_t queued = 0;                             // requests queued here
  std::uint64_t holds = 0;      // dispatches held for another replica's flow, so far
  std::uint64_t overrides = 0;  // holds given up after max_hold, so far
};

}  // namespace sluice::flowcontrol
