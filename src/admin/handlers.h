// The admin plane's route handlers (private to src/admin), one file per
// resource; routes.cc lists which path and method calls which. Each answers
// through `respond` exactly once, on the admin thread.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "admin/admin_requests.h"
#include "admin/handler_context.h"
#include "admin/routes.h"
#include "protocol/steering.h"

namespace sluice::admin {

// health.cc: the probes.
void healthz(HandlerContext& hc, const Request& req, Respond respond);
void readyz(HandlerContext& hc, const Request& req, Respond respond);

// metrics.cc: the Prometheus exposition.
void metrics(HandlerContext& hc, const Request& req, Respond respond);

// lifecycle.cc: drain (where it stands, start, end) and reload.
void drain_status(HandlerContext& hc, const Request& req, Respond respond);
void drain_start(HandlerContext& hc, const Request& req, Respond respond);
void drain_end(HandlerContext& hc, const Request& req, Respond respond);
void reload(HandlerContext& hc, const Request& req, Respond respond);

// fleet.cc: the fleet's sync state and replicas.
void fleet_status(HandlerContext& hc, const Request& req, Respond respond);

// endpoints.cc
void list_endpoints(HandlerContext& hc, const Request& req, Respond respond);

// bands.cc: {priority} is checked by check_priority before any method.
std::optional<AdminReply> check_priority(std::string_view param);
void list_bands(HandlerContext& hc, const Request& req, Respond respond);
void get_band(HandlerContext& hc, const Request& req, Respond respond);
void put_band(HandlerContext& hc, const Request& req, Respond respond);
void delete_band(HandlerContext& hc, const Request& req, Respond respond);

// flows.cc
void list_flows(HandlerContext& hc, const Request& req, Respond respond);
void get_flow(HandlerContext& hc, const Request& req, Respond respond);
void put_flow(HandlerContext& hc, const Request& req, Respond respond);
void delete_flow(HandlerContext& hc, const Request& req, Respond respond);

// keys.cc: API keys (the key is shown once, by POST).
void list_keys(HandlerContext& hc, const Request& req, Respond respond);
void create_key(HandlerContext& hc, const Request& req, Respond respond);
void get_key(HandlerContext& hc, const Request& req, Respond respond);
void put_key(HandlerContext& hc, const Request& req, Respond respond);
void delete_key(HandlerContext& hc, const Request& req, Respond respond);

// quotas.cc: each limit as it stands; a tenant's reset ({tenant}/reset).
void list_quotas(HandlerContext& hc, const Request& req, Respond respond);
void reset_quota(HandlerContext& hc, const Request& req, Respond respond);

// Rendering never throws: bytes that are not UTF-8 (a Latin-1 fairness id, an
// endpoint label, a path) come out as U+FFFD.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

inline double ms_since(std::chrono::steady_clock::time_point t,
                       std::chrono::steady_clock::time_point now) {
  return std::chrono::duration<double, std::milli>(now - t).count();
}

}  // namespace sluice::admin
