#include "flowcontrol/from_config.h"

#include "flowcontrol/saturation_detectors.h"
#include "scheduling/from_config.h"
#include "sluice/extensions.h"

namespace sluice::flowcontrol {

namespace {

registry::BandConfig band(const config::BandSpec& b) {
  registry::BandConfig out;
  out.priority = b.priority;
  out.max_bytes = b.max_bytes;
  out.max_requests = b.max_requests;
  out.fairness = b.fairness_type;
  out.ordering = b.ordering_type;
  out.share = b.anti_starvation_share;
  out.ttl_set = b.ttl_set;
  if (b.ttl) out.ttl = std::chrono::duration_cast<Duration>(*b.ttl);
  return out;
}

}  // namespace

ControllerConfig ungated_controller_config(const config::Config& config) {
  // Flows exist without the gate too (scheduling, statistics): their
  // number and lifetime stay bounded.
  ControllerConfig c;
  c.registry.max_flows = config.flow_control.max_flows;
  c.flow_idle_timeout = config.flow_control.flow_idle_timeout;
  return c;
}

ControllerConfig controller_config(const config::Config& config) {
  const auto& fc = config.flow_control;
  ControllerConfig c;
  c.registry.max_bytes = fc.max_bytes;
  c.registry.max_requests = fc.max_requests;
  c.registry.max_flows = fc.max_flows;
  c.registry.default_band = band(fc.default_band);
  if (fc.default_negative_band) c.registry.default_negative_band = band(*fc.default_negative_band);
  for (const auto& b : fc.bands) c.registry.bands.push_back(band(b));
  c.default_ttl = fc.default_request_ttl;
  c.no_endpoint_ttl_set = fc.no_endpoint_ttl_set;
  c.no_endpoint_ttl = fc.no_endpoint_request_ttl;
  c.displacement = fc.displacement ? "lowest-band-newest-first" : "none";
  c.flow_idle_timeout = fc.flow_idle_timeout;
  c.fairness.input_price = fc.vtc_input_price;
  c.fairness.output_price = fc.vtc_output_price;
  const auto& pa = fc.program_aware;
  c.fairness.program_aware =
      ProgramAwareParams{pa.weight_service,       pa.weight_head_wait,       pa.half_life_seconds,
                         pa.eviction_ttl_seconds, pa.eviction_sweep_seconds, pa.max_programs};
  const auto& h = fc.headroom;
  c.headroom = HeadroomConfig{h.enabled,
                              h.protected_priority,
                              static_cast<std::uint32_t>(h.reserve),
                              h.reserve_tokens,
                              h.pool_scope,
                              h.lend,
                              h.lend_after_idle,
                              static_cast<std::uint32_t>(h.over_admission),
                              static_cast<std::uint32_t>(h.reserve_endpoints)};
  const auto& e = fc.eviction;
  c.eviction.enabled = e.enabled;
  c.eviction.priorities = e.priorities;
  c.eviction.wait_budget = e.wait_budget;
  c.eviction.confirmation_timeout = e.confirmation_timeout;
  // llm-d's grace: 10 ms behind sluice's own in-flight count, otherwise long
  // enough for the freed room to show in a scrape (staleness + 300 ms).
  c.eviction.grace =
      e.grace ? *e.grace
      : config.saturation_detector.type == "concurrency-detector"
          ? std::chrono::milliseconds(10)
          : config.saturation_detector.metrics_staleness_threshold + std::chrono::milliseconds(300);
  return c;
}

std::unique_ptr<SaturationDetector> make_detector(const config::SaturationDetectorSpec& spec) {
  auto d = builtin_extensions().build<SaturationDetector>(spec.type, spec);
  if (!d) throw config::ConfigError("unknown saturation detector '" + spec.type + "'");
  return d;
}

std::unique_ptr<UsageLimitPolicy> make_usage_limit_policy(const config::UsageLimitSpec& spec) {
  if (spec.type.empty()) return nullptr;
  auto p = builtin_extensions().build<UsageLimitPolicy>(spec.type, spec);
  if (!p) throw config::ConfigError("unknown usage limit policy '" + spec.type + "'");
  return p;
}

std::vector<std::unique_ptr<Admitter>> make_admitters(const config::Config& config) {
  std::vector<std::unique_ptr<Admitter>> out;
  for (const auto& s : config.plugins) {
    if (!is_builtin(s.type, ExtensionKind::kAdmitter)) continue;
    PluginParams params(s.parameters, config.source, "plugins[" + s.name + "].parameters", s.line);
    auto a = builtin_extensions().build<Admitter>(s.type, params);
    if (!a) throw config::ConfigError("unknown admitter '" + s.type + "'");
    out.push_back(std::move(a));
  }
  return out;
}

std::unique_ptr<Controller> make_controller(const config::Config& config) {
  const bool gated = config.flow_control.enabled;
  // Without the flowControl gate the controller only schedules: one band,
  // no limits, no TTL, dispatch at once (GIE's scheduler without flow
  // control). Scheduling still runs on the dispatcher, its single writer.
  ControllerConfig cc = gated ? controller_config(config) : ungated_controller_config(config);
  auto c = std::make_unique<Controller>(std::move(cc), make_detector(config.saturation_detector),
                                        [](const Decision&) {});
  for (const auto& f : config.flows) c->registry().set_configured_weight(f.id, f.weight);
  std::vector<EndpointIdentity> ids;
  for (const auto& e : config.endpoints)
    ids.push_back(EndpointIdentity{e.address, e.engine,
                                   scheduling::Labels(e.labels.begin(), e.labels.end()), false});
  c->set_endpoints(ids);
  c->set_scheduler(scheduling::build_scheduler(config));
  c->set_admitters(make_admitters(config));
  c->set_gated(gated);
  if (gated) c->set_usage_limit_policy(make_usage_limit_policy(config.flow_control.usage_limit));
  c->set_staleness_threshold(config.saturation_detector.metrics_staleness_threshold);
  if (config.redis.enabled) {
    FleetSettings fleet;
    fleet.enabled = true;
    fleet.fairness_slack = config.redis.fairness_slack;
    fleet.max_hold = std::chrono::duration_cast<Duration>(config.redis.max_hold);
    c->set_fleet(fleet);
  }
  return c;
}

}  // namespace sluice::flowcontrol
