// GET /healthz and /readyz: the probes, open without the token.
#include "admin/handlers.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

using json = nlohmann::json;

void healthz(HandlerContext&, const Request&, Respond respond) {
  respond(AdminReply{200, R"({"status":"ok"})"});
}

// Ready: not draining, and some endpoint's metrics are fresh.
void readyz(HandlerContext& hc, const Request&, Respond respond) {
  const auto now = datalayer::Clock::now();
  const auto fresh = hc.ctx.config.saturation_detector.metrics_staleness_threshold;
  int ready = 0;
  for (std::size_t i = 0; i < hc.ctx.endpoints.size(); ++i) {
    const auto& ep = hc.ctx.endpoints.at(i);
    const auto at = ep.metrics_ns.load(std::memory_order_acquire);
    if (!ep.removed.load() && at != 0 &&
        now - datalayer::Clock::time_point(datalayer::Clock::duration(at)) <= fresh)
      ++ready;
  }
  if (hc.ctx.draining.load())
    return respond(AdminReply{
        503, json{{"status", "not ready"}, {"reason", "draining"}}.dump(-1, ' ', false, kReplace)});
  if (ready == 0)
    return respond(AdminReply{
        503, json{{"status", "not ready"}, {"reason", "no endpoint with fresh metrics"}}.dump(
                 -1, ' ', false, kReplace)});
  respond(AdminReply{200, json{{"status", "ready"}, {"endpointsWithFreshMetrics", ready}}.dump(
                              -1, ' ', false, kReplace)});
}

}  // namespace sluice::admin
