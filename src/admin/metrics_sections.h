// The sections of GET /metrics that carry both GIE's names and llm-d's
// llm_d_epp_* twins (src/admin/metrics_llmd.cc), and the dispatcher's copy
// they read. The rest of the exposition is in metrics.cc.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admin/handler_context.h"
#include "admin/program_aware_metrics.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/plugin_metrics.h"
#include "observe/metrics_text.h"
#include "observe/request_stats.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

struct TimingCopy {
  std::string extension_point, type, name;
  std::array<std::uint64_t, 13> counts{};
  double sum_seconds = 0;
};

// Flow control's state for /metrics apart from the flows: bounded in size
// (queue-duration series are capped by metricsMaxFlows), copied in one
// dispatcher event.
struct DispatcherCopy {
  std::vector<flowcontrol::QueueDurationSeries> queue_durations;
  double pool_saturation = 0;
  std::size_t flow_count = 0;
  std::uint64_t flow_limit_rejections = 0;
  std::vector<flowcontrol::Controller::BandCeiling> ceilings;
  std::uint64_t ceiling_holds = 0;
  std::uint64_t headroom_holds = 0;
  flowcontrol::Controller::EvictionStats eviction;
  std::vector<TimingCopy> timings;
  ProgramAwareCopy program_aware;
  flowcontrol::PluginMetricsCopy plugins;  // llm-d's per-plugin metrics
  bool failed = false;
};

// The value of the pool labels (`name`, `inference_pool`): llm-d's is the
// InferencePool's name; sluice serves one pool, named "sluice".
inline constexpr std::string_view kPoolName = "sluice";

// GIE's inference_objective_* request families' llm_d_epp_* twins.
void render_llmd_requests(observe::MetricsText& m, const observe::ThreadStats& requests);
// The flow-control queues (size, bytes, time in the queue), both names.
void render_queues(observe::MetricsText& m, const DispatcherCopy& c, const FlowsSnapshot& flows,
                   std::size_t max_flows);
// The pool saturation, both names.
void render_saturation(observe::MetricsText& m, const DispatcherCopy& c);
// The pool from the scraped metrics, both names.
void render_pool(observe::MetricsText& m, proxy::ProxyContext& ctx);
// Scheduler timings: whole cycles, and each plugin's calls, both names.
void render_scheduler(observe::MetricsText& m, const DispatcherCopy& c);

}  // namespace sluice::admin
