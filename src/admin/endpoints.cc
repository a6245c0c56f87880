// GET /admin/v1/endpoints: the endpoints, their health and scraped metrics.
#include <algorithm>
#include <vector>

#include "admin/handlers.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

// The indexes of the endpoints shown: all of them, or when there are more
// than `limit`, the `limit` longest queues (waiting and in flight).
std::vector<std::size_t> shown_endpoints(const datalayer::EndpointSet& endpoints,
                                         std::size_t limit) {
  std::vector<std::size_t> order(endpoints.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (order.size() > limit) {
    // The loads read once: I/O threads change them meanwhile, and a sort
    // whose comparisons change under it is undefined behaviour.
    std::vector<double> load(order.size());
    for (std::size_t i = 0; i < load.size(); ++i) {
      const auto& ep = endpoints.at(i);
      load[i] = static_cast<double>(ep.waiting.load()) + static_cast<double>(ep.in_flight.load());
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return load[a] > load[b]; });
    order.resize(limit);
  }
  return order;
}

json endpoint_json(const datalayer::EndpointState& ep, datalayer::Clock::time_point now) {
  const auto at = ep.metrics_ns.load(std::memory_order_acquire);
  json e{{"address", ep.config.address},
         {"engine", ep.config.engine},
         {"labels", ep.config.labels},
         {"removed", ep.removed.load()},
         {"healthy", ep.usable(now)},
         {"inFlight", ep.in_flight.load()},
         {"connectFailures", ep.connect_failures.load()}};
  if (at != 0) {
    e["metrics"] = {
        {"waiting", ep.waiting.load()},
        {"running", ep.running.load()},
        {"kvCacheUsage", ep.kv_cache_usage.load()},
        {"ageMs", ms_since(datalayer::Clock::time_point(datalayer::Clock::duration(at)), now)}};
  } else {
    e["metrics"] = nullptr;
  }
  return e;
}

}  // namespace

// At most ?limit= (default 1000), the longest queues first when capped;
// x-total-count says how many there are.
void list_endpoints(HandlerContext& hc, const Request& req, Respond respond) {
  auto limit = limit_param(req.target, 1000, datalayer::EndpointSet::kMaxEndpoints);
  if (!limit)
    return respond(
        error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 4096"));
  const auto now = datalayer::Clock::now();
  json out = json::array();
  for (std::size_t i : shown_endpoints(hc.ctx.endpoints, *limit))
    out.push_back(endpoint_json(hc.ctx.endpoints.at(i), now));
  AdminReply r{200, out.dump(-1, ' ', false, kReplace)};
  r.total = hc.ctx.endpoints.size();
  respond(std::move(r));
}

}  // namespace sluice::admin
