// The admin plane's routes (private to src/admin): one table of every path,
// who may call it, the methods it answers, which of those every replica of a
// fleet applies, and their handlers (one file per resource: health.cc,
// metrics.cc, lifecycle.cc, fleet.cc, endpoints.cc, bands.cc, flows.cc).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "admin/admin_requests.h"
#include "admin/handler_context.h"

namespace sluice::admin {

// One call as its handler sees it. The references hold during the handler's
// call only: what an answer given later needs is copied.
struct Request {
  const std::string& method;
  const std::string& target;  // the path and the query
  const std::string& path;    // the target up to '?'
  std::string_view param;     // what the route's {...} matched; empty without one
  const std::string& body;
  bool replicated;  // a change made through another replica (apply_replicated)
};

using Handler = void (*)(HandlerContext&, const Request&, Respond);

// Who may call a path when an admin token is configured (without one,
// anyone may: main refuses a non-loopback admin address without a token).
enum class Access {
  kToken,            // the token: flows, bands, endpoints and drain state name tenants and traffic
  kOpen,             // anyone: the liveness and readiness probes
  kOpenIfConfigured  // anyone when server.adminOpenMetrics, else the token
};

// Whether the other replicas of a fleet apply a change made through this
// one: once it succeeded here, it is published (FleetSync) and each of them
// applies it (AdminServer::apply_replicated).
enum class Fleet {
  kLocal,      // this replica's alone
  kFleetWide,  // every replica's
  kScopeFleet  // every replica's when the target says scope=fleet (a plain drain
               // is this replica's, as in a rolling restart)
};

struct MethodRoute {
  std::string_view method;  // empty: an unused slot
  Fleet fleet = Fleet::kLocal;
  Handler handler = nullptr;
};

struct Route {
  // An exact path, or a prefix followed by "{name}", which matches one byte
  // or more of anything (slashes too).
  std::string_view path;
  Access access = Access::kToken;
  // Checks {...} before the method is looked at (a bad band priority is 400
  // whatever the method); null: anything goes.
  std::optional<AdminReply> (*check)(std::string_view param) = nullptr;
  std::array<MethodRoute, 3> methods{};
};

// The route of `path` (a target up to '?'), with what its {...} matched in
// `param`; null: none (404).
const Route* find_route(const std::string& path, std::string_view& param);
// The entry of `method` in `route`; null: 405 with allowed_methods(route).
const MethodRoute* find_method(const Route& route, const std::string& method);
// "use GET", "use GET, PUT or DELETE".
std::string allowed_methods(const Route& route);
// Whether `route` (null: an unknown path) may be called without the token.
bool is_open(const Route* route, bool admin_open_metrics);
// Whether the call of `target` through `method` is published to the fleet.
bool is_fleet_wide(const MethodRoute& method, const std::string& target);

}  // namespace sluice::admin
