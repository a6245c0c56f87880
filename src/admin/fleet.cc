// GET /admin/v1/fleet: the fleet's sync state and the replicas it saw.
#include "admin/handlers.h"
#include "fleet/fleet_sync.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

json replicas_json(const fleet::FleetStatus& st) {
  json replicas = json::array();
  for (const auto& r : st.replicas)
    replicas.push_back(json{{"id", r.id},
                            {"address", r.address},
                            {"self", r.self},
                            {"lastSyncUnixMs", r.last_sync_unix_ms},
                            {"lagMs", r.lag_ms},
                            {"seq", r.seq}});
  return replicas;
}

json refused_json(const fleet::FleetStatus& st) {
  json refused = json::array();
  for (const auto& r : st.refused)
    refused.push_back(json{{"method", r.method},
                           {"target", r.target},
                           {"status", r.status},
                           {"code", r.code},
                           {"message", r.message},
                           {"atUnixMs", r.at_unix_ms}});
  return refused;
}

}  // namespace

void fleet_status(HandlerContext& hc, const Request&, Respond respond) {
  if (!hc.fleet())
    return respond(AdminReply{200, json{{"enabled", false}}.dump(-1, ' ', false, kReplace)});
  const fleet::FleetStatus st = hc.fleet()->status();
  json out{{"enabled", true},
           {"replicaId", st.replica_id},
           {"connected", st.connected},
           {"degraded", st.degraded},
           {"syncs", st.syncs},
           {"failures", st.failures},
           {"reconnects", st.reconnects},
           {"lastError", st.last_error},
           {"lastOkUnixMs", st.last_ok_unix_ms},
           {"lastSyncSeconds", st.last_sync_seconds},
           {"holds", st.holds},
           {"holdOverrides", st.hold_overrides},
           {"redisCommands", st.commands},
           {"operationsPublished", st.operations_published},
           {"operationsApplied", st.operations_applied},
           {"operationsRefused", st.operations_refused},
           {"lastRefused", refused_json(st)},
           {"duplicateId", st.duplicate_id},
           {"duplicateIdSyncs", st.duplicate_id_syncs},
           {"replicas", replicas_json(st)}};
  respond(AdminReply{200, out.dump(-1, ' ', false, kReplace)});
}

}  // namespace sluice::admin
