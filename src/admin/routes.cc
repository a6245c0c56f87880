#include "admin/routes.h"

#include "admin/handlers.h"

namespace sluice::admin {

namespace {

constexpr Fleet kLocal = Fleet::kLocal;
constexpr Fleet kFleetWide = Fleet::kFleetWide;
constexpr Fleet kScopeFleet = Fleet::kScopeFleet;

// Every path of the admin plane. Methods answer in the order listed here
// (which is also the order of a 405's "use ...").
constexpr std::array<Route, 15> kRoutes{{
    {"/healthz", Access::kOpen, nullptr, {{{"GET", kLocal, healthz}}}},
    {"/readyz", Access::kOpen, nullptr, {{{"GET", kLocal, readyz}}}},
    {"/metrics", Access::kOpenIfConfigured, nullptr, {{{"GET", kLocal, metrics}}}},
    {"/admin/v1/drain",
     Access::kToken,
     nullptr,
     {{{"GET", kLocal, drain_status},
       {"POST", kScopeFleet, drain_start},
       {"DELETE", kScopeFleet, drain_end}}}},
    {"/admin/v1/reload", Access::kToken, nullptr, {{{"POST", kLocal, reload}}}},
    {"/admin/v1/fleet", Access::kToken, nullptr, {{{"GET", kLocal, fleet_status}}}},
    {"/admin/v1/endpoints", Access::kToken, nullptr, {{{"GET", kLocal, list_endpoints}}}},
    {"/admin/v1/bands", Access::kToken, nullptr, {{{"GET", kLocal, list_bands}}}},
    {"/admin/v1/bands/{priority}",
     Access::kToken,
     check_priority,
     {{{"GET", kLocal, get_band},
       {"PUT", kFleetWide, put_band},
       {"DELETE", kFleetWide, delete_band}}}},
    {"/admin/v1/flows", Access::kToken, nullptr, {{{"GET", kLocal, list_flows}}}},
    {"/admin/v1/flows/{id}",
     Access::kToken,
     nullptr,
     {{{"GET", kLocal, get_flow},
       {"PUT", kFleetWide, put_flow},
       {"DELETE", kFleetWide, delete_flow}}}},
    // POST makes a key here and stores its record for the others as a PUT.
    {"/admin/v1/keys",
     Access::kToken,
     nullptr,
     {{{"GET", kLocal, list_keys}, {"POST", kLocal, create_key}}}},
    {"/admin/v1/keys/{id}",
     Access::kToken,
     nullptr,
     {{{"GET", kLocal, get_key},
       {"PUT", kFleetWide, put_key},
       {"DELETE", kFleetWide, delete_key}}}},
    {"/admin/v1/quotas", Access::kToken, nullptr, {{{"GET", kLocal, list_quotas}}}},
    {"/admin/v1/quotas/{tenant}", Access::kToken, nullptr, {{{"POST", kFleetWide, reset_quota}}}},
}};

}  // namespace

const Route* find_route(const std::string& path, std::string_view& param) {
  for (const Route& r : kRoutes) {
    const auto brace = r.path.find('{');
    if (brace == std::string_view::npos) {
      if (path == r.path) {
        param = {};
        return &r;
      }
      continue;
    }
    const std::string_view prefix = r.path.substr(0, brace);
    if (path.size() > prefix.size() && std::string_view(path).substr(0, prefix.size()) == prefix) {
      param = std::string_view(path).substr(prefix.size());
      return &r;
    }
  }
  return nullptr;
}

const MethodRoute* find_method(const Route& route, const std::string& method) {
  for (const MethodRoute& m : route.methods)
    if (!m.method.empty() && m.method == method) return &m;
  return nullptr;
}

std::string allowed_methods(const Route& route) {
  std::size_t n = 0;
  for (const MethodRoute& m : route.methods) n += !m.method.empty();
  std::string text = "use ";
  std::size_t i = 0;
  for (const MethodRoute& m : route.methods) {
    if (m.method.empty()) continue;
    if (i > 0) text += i + 1 == n ? " or " : ", ";
    text += m.method;
    ++i;
  }
  return text;
}

bool is_open(const Route* route, bool admin_open_metrics) {
  if (!route) return false;
  return route->access == Access::kOpen ||
         (route->access == Access::kOpenIfConfigured && admin_open_metrics);
}

bool is_fleet_wide(const MethodRoute& method, const std::string& target) {
  switch (method.fleet) {
    case Fleet::kLocal:
      return false;
    case Fleet::kFleetWide:
      return true;
    case Fleet::kScopeFleet:
      return target.find("scope=fleet") != std::string::npos;
  }
  return false;
}

}  // namespace sluice::admin
