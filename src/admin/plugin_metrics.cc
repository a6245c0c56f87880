#include "admin/plugin_metrics.h"

namespace sluice::admin {

namespace {

using Rows = std::vector<std::uint64_t>;

// llm-d's labels are endpoint_name, namespace, producer_name, fairness_id,
// priority; sluice's endpoints have no namespace and the producer does not
// split its counts by flow, so those three are left out (an empty label is
// an absent one to Prometheus: sum by (endpoint_name) reads the same).
void render_inflight(observe::MetricsText& m, const flowcontrol::PluginMetricsCopy& c,
                     std::span<const std::string> addresses, std::string_view family,
                     Rows flowcontrol::PluginMetricsCopy::InFlight::*rows) {
  for (const auto& p : c.inflight) {
    const Rows& v = p.*rows;
    for (std::size_t i = 0; i < addresses.size(); ++i)
      m.sample(family, {{"endpoint_name", addresses[i]}, {"producer_name", p.producer}},
               static_cast<double>(i < v.size() ? v[i] : 0));
  }
}

void render_decisions(observe::MetricsText& m, const flowcontrol::PluginMetricsCopy& c) {
  constexpr std::string_view kName = "llm_d_epp_disagg_decision_total";
  m.family(kName, "counter", "[ALPHA] Total number of disaggregation routing decisions made");
  for (const auto& d : c.decisions) {
    m.sample(kName,
             {{"plugin_name", d.plugin_name},
              {"plugin_type", d.plugin_type},
              {"model_name", d.model},
              {"decision_type", "decode-only"}},
             static_cast<double>(d.decode_only));
    m.sample(kName,
             {{"plugin_name", d.plugin_name},
              {"plugin_type", d.plugin_type},
              {"model_name", d.model},
              {"decision_type", "prefill-decode"}},
             static_cast<double>(d.prefill_decode));
  }
}

}  // namespace

void render_plugin_metrics(observe::MetricsText& m, const flowcontrol::PluginMetricsCopy& c,
                           std::span<const std::string> addresses) {
  if (!c.inflight.empty()) {
    m.family("llm_d_epp_inflight_requests", "gauge",
             "[ALPHA] Current number of in-flight requests per endpoint, as tracked by the "
             "in-flight load producer.");
    render_inflight(m, c, addresses, "llm_d_epp_inflight_requests",
                    &flowcontrol::PluginMetricsCopy::InFlight::requests);
    m.family("llm_d_epp_inflight_tokens", "gauge",
             "[ALPHA] Current number of in-flight tokens per endpoint (uncached prompt tokens, "
             "optionally plus estimated output), as tracked by the in-flight load producer.");
    render_inflight(m, c, addresses, "llm_d_epp_inflight_tokens",
                    &flowcontrol::PluginMetricsCopy::InFlight::tokens);
  }
  if (c.disagg) render_decisions(m, c);
}

}  // namespace sluice::admin
