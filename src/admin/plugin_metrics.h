// llm-d's per-plugin metrics of the scheduler's plugins, rendered on the
// admin thread from the dispatcher's copy (flowcontrol/plugin_metrics.h):
// llm_d_epp_inflight_requests and _inflight_tokens when an
// inflight-load-producer is configured (one row per producer and endpoint,
// bounded by the pool as sluice_endpoint_in_flight is), and
// llm_d_epp_disagg_decision_total when a disagg-profile-handler is.
#pragma once

#include <span>
#include <string>

#include "flowcontrol/plugin_metrics.h"
#include "observe/metrics_text.h"

namespace sluice::admin {

// `addresses[i]` names endpoint slot i (llm-d's endpoint_name).
void render_plugin_metrics(observe::MetricsText& m, const flowcontrol::PluginMetricsCopy& c,
                           std::span<const std::string> addresses);

}  // namespace sluice::admin
