#include "flowcontrol/plugin_metrics.h"

#include "flowcontrol/controller.h"
#include "scheduling/plugins/disagg_profile_handler.h"
#include "scheduling/plugins/inflight_load_producer.h"

namespace sluice::flowcontrol {

namespace {

void copy_inflight(const scheduling::InFlightLoadProducer& p, PluginMetricsCopy& out) {
  auto& row = out.inflight.emplace_back();
  const std::size_t slots = p.slots();
  row.producer = p.name();
  row.requests.resize(slots);
  row.tokens.resize(slots);
  for (std::uint32_t s = 0; s < slots; ++s) {
    row.requests[s] = p.requests_in_flight(s);
    row.tokens[s] = p.tokens_in_flight(s);
  }
}

void copy_decisions(const scheduling::DisaggProfileHandler& h, PluginMetricsCopy& out) {
  out.disagg = true;
  for (const auto& [model, n] : h.decisions())
    out.decisions.push_back(PluginMetricsCopy::Decision{h.name(), std::string(h.type()), model,
                                                        n.decode_only, n.prefill_decode});
}

}  // namespace

void copy_plugin_metrics(Controller& c, PluginMetricsCopy& out) {
  auto* s = c.scheduler();
  if (!s) return;
  for (const auto& plugin : s->plugins()) {
    if (auto* p = dynamic_cast<const scheduling::InFlightLoadProducer*>(plugin.get()))
      copy_inflight(*p, out);
    else if (auto* h = dynamic_cast<const scheduling::DisaggProfileHandler*>(plugin.get()))
      copy_decisions(*h, out);
  }
}

}  // namespace sluice::flowcontrol
