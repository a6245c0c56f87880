#include "flowcontrol/from_config.h"

#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {

namespace {

registry::BandConfig band(const config::BandSpec& b) {
  return registry::BandConfig{b.priority,      b.max_bytes,     b.max_requests,
                              b.fairness_type, b.ordering_type, b.anti_starvation_share};
}

}  // namespace

ControllerConfig controller_config(const config::Config& config) {
  const auto& fc = config.flow_control;
  ControllerConfig c;
  c.registry.max_bytes = fc.max_bytes;
  c.registry.max_requests = fc.max_requests;
  c.registry.default_band = band(fc.default_band);
  for (const auto& b : fc.bands) c.registry.bands.push_back(band(b));
  c.default_ttl = fc.default_request_ttl;
  c.displacement = fc.displacement ? "lowest-band-newest-first" : "none";
  c.flow_idle_timeout = fc.flow_idle_timeout;
  c.fairness.input_price = fc.vtc_input_price;
  c.fairness.output_price = fc.vtc_output_price;
  return c;
}

std::unique_ptr<Controller> make_controller(const config::Config& config) {
  auto c = std::make_unique<Controller>(controller_config(config), make_detector(config.saturation_detector),
                                        [](const Decision&) {});
  for (const auto& f : config.flows) c->registry().set_configured_weight(f.id, f.weight);
  c->set_endpoint_count(config.endpoints.size());
  return c;
}

}  // namespace sluice::flowcontrol
