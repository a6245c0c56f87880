#include "proxy/proxy_context.h"

#include <algorithm>

#include "datalayer/upstream_tls.h"
#include "flowcontrol/from_config.h"
#include "proxy/tls_context.h"

namespace sluice::proxy {

std::shared_ptr<RequestPolicy> make_request_policy(const config::Config& c,
                                                   const scheduling::RequestPreparation& prep) {
  auto p = std::make_shared<RequestPolicy>(c);
  p->preparation = prep;
  return p;
}

RequestPolicy::RequestPolicy(const config::Config& c) {
  for (const auto& o : c.objectives) objectives[o.name] = ObjectiveInfo{o.priority, o.ttl};
  agent_session_headers = c.agent_session_headers;
  if (!c.flow_control.enabled) legacy_detector = flowcontrol::make_detector(c.saturation_detector);
  if (c.flow_control.enabled) room_detector = flowcontrol::make_detector(c.saturation_detector);
  credentials =
      std::make_shared<const config::UpstreamCredentials>(config::upstream_credentials(c));
  parse_openai = c.request_handler.openai;
  passthrough = c.request_handler.passthrough;
  propagate_priority = c.request_handler.propagate_priority;
  quotas = make_quota_policy(c);
}

ProxyContext::ProxyContext(const config::Config& c)
    : config(c),
      endpoints(c.endpoints),
      quotas(&quota::unix_now_ms, c.quota.max_counted_tenants),
      connections(c.server.max_connections),
      admin_connections(c.server.admin_max_connections),
      body_budget(c.server.max_buffered_body_bytes > 0
                      ? c.server.max_buffered_body_bytes
                      : default_body_budget(c.server.max_body_bytes)) {
  auto controller = flowcontrol::make_controller(c);
  controller->set_metrics_max_flows(c.server.metrics_max_flows);
  {
    auto p = make_request_policy(c, controller->scheduler()->preparation());
    std::string error;
    p->upstream_tls = datalayer::build_upstream_tls(c, error);
    if (!p->upstream_tls) throw config::ConfigError(error);
    quotas.configure(p->quotas);  // the config refuses an owner it could not set
    policy = std::move(p);
  }
  authenticator = std::make_shared<auth::Authenticator>(c, nullptr);
  gated = c.flow_control.enabled;
  flow_control = std::make_unique<flowcontrol::ControllerShell>(std::move(controller));
  for (const auto& p : c.plugins) {
    if (p.type != "metrics-data-source" || !p.parameters || !p.parameters.IsMap()) continue;
    if (auto path = p.parameters["path"]; path && path.IsScalar() && !path.Scalar().empty())
      metrics_path = path.Scalar();
  }
}

ProxyContext::~ProxyContext() = default;

flowcontrol::EndpointLoad endpoint_load(const datalayer::EndpointState& ep, int in_flight) {
  flowcontrol::EndpointLoad load;
  const auto at = ep.metrics_ns.load(std::memory_order_acquire);
  load.has_metrics = at != 0;
  load.metrics_time = flowcontrol::TimePoint(flowcontrol::Duration(at));
  load.waiting = ep.waiting.load(std::memory_order_relaxed);
  load.running = ep.running.load(std::memory_order_relaxed);
  load.kv_cache_usage = ep.kv_cache_usage.load(std::memory_order_relaxed);
  load.in_flight = static_cast<std::uint32_t>(std::max(0, in_flight));
  return load;
}

bool ProxyContext::pool_saturated(const flowcontrol::SaturationDetector& detector) const {
  const auto now = datalayer::Clock::now();
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const auto& ep = endpoints.at(i);
    const auto load = endpoint_load(ep, ep.in_flight.load(std::memory_order_relaxed));
    if (ep.usable(now) && detector.has_room(load, now)) return false;
  }
  return true;
}

std::size_t ProxyContext::in_flight() const {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < endpoints.size(); ++i)
    n += endpoints.at(i).in_flight.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

}  // namespace sluice::proxy
