// The sections of GET /metrics that carry GIE's names and, beside them,
// llm-d's llm_d_epp_* twins (llm-d-router pkg/epp/metrics/
// llm_d_router_metrics.go): the same value under both, so dashboards on
// either work. llm-d's help texts and label names; sluice's buckets (one
// histogram feeds both names). docs/operations.md lists the pairs and the
// llm-d series sluice does not emit.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "admin/metrics_sections.h"

namespace sluice::admin {

namespace {

// GIE's names for how a queued request's wait ended.
std::string_view queue_outcome_name(QueueOutcome o) {
  switch (o) {
    case QueueOutcome::kDispatched:
      return "Dispatched";
    case QueueOutcome::kRejectedCapacity:
      return "RejectedCapacity";
    case QueueOutcome::kRejectedNoEndpoints:
      return "RejectedNoEndpoints";
    case QueueOutcome::kRejectedOther:
      return "RejectedOther";
    case QueueOutcome::kEvictedTTL:
      return "EvictedTTL";
    case QueueOutcome::kEvictedContextCancelled:
      return "EvictedContextCancelled";
    case QueueOutcome::kEvictedDisplaced:
      return "EvictedDisplaced";
    case QueueOutcome::kEvictedOther:
      return "EvictedOther";
    case QueueOutcome::kEvictedPreempted:
      return "EvictedPreempted";
  }
  return "Unknown";
}

template <class H>
void histogram(observe::MetricsText& m, std::string_view name, observe::MetricsText::Labels labels,
               const H& h) {
  m.histogram(name, labels, h.kBounds, h.counts, h.sum);
}

constexpr std::string_view kQueueDuration = "llm_d_epp_flow_control_request_queue_duration_seconds";

void render_queue_durations(observe::MetricsText& m, const DispatcherCopy& c) {
  m.family("inference_extension_flow_control_request_queue_duration_seconds", "histogram",
           "Time in the flow-control queue, by flow, priority and how the wait ended.");
  for (const auto& q : c.queue_durations) {
    const std::string pr = std::to_string(q.priority);
    m.histogram("inference_extension_flow_control_request_queue_duration_seconds",
                {{"fairness_id", q.fairness_id},
                 {"priority", pr},
                 {"outcome", queue_outcome_name(q.outcome)}},
                flowcontrol::LatencyHistogram::kBounds, q.histogram.counts, q.histogram.sum);
  }
  m.family(kQueueDuration, "histogram",
           "[ALPHA] Distribution of total time requests spend in the Flow Control layer (from "
           "enqueue to final outcome).");
  for (const auto& q : c.queue_durations) {
    const std::string pr = std::to_string(q.priority);
    m.histogram(kQueueDuration,
                {{"fairness_id", q.fairness_id},
                 {"priority", pr},
                 {"outcome", queue_outcome_name(q.outcome)},
                 {"inference_pool", kPoolName}},
                flowcontrol::LatencyHistogram::kBounds, q.histogram.counts, q.histogram.sum);
  }
}

struct QueueRow {
  const std::string* id;
  int priority;
  double size, bytes;
};

// The largest `max_flows` flows by queued bytes, and the rest summed per
// priority (the overflow rows), for both names of both gauges.
struct QueueRows {
  std::vector<QueueRow> named;
  std::map<int, std::pair<double, double>> other;
};

QueueRows queue_rows(const FlowsSnapshot& flows, std::size_t max_flows) {
  QueueRows r;
  auto& qs = r.named;
  qs.reserve(flows.flows.size());
  for (const auto& f : flows.flows)
    qs.push_back({&f.id, f.priority, static_cast<double>(f.queued), static_cast<double>(f.bytes)});
  const auto by_bytes = [](const QueueRow& a, const QueueRow& b) { return a.bytes > b.bytes; };
  if (qs.size() > max_flows) {
    std::nth_element(qs.begin(), qs.begin() + static_cast<std::ptrdiff_t>(max_flows), qs.end(),
                     by_bytes);
    for (std::size_t i = max_flows; i < qs.size(); ++i) {
      r.other[qs[i].priority].first += qs[i].size;
      r.other[qs[i].priority].second += qs[i].bytes;
    }
    qs.resize(max_flows);
  }
  std::sort(qs.begin(), qs.end(), by_bytes);
  return r;
}

// One gauge (size or bytes) under one name; llm-d's adds inference_pool.
void render_queue_gauge(observe::MetricsText& m, const QueueRows& r, std::string_view name,
                        bool bytes, bool llmd) {
  const auto sample = [&](std::string_view id, int priority, double v) {
    const std::string pr = std::to_string(priority);
    if (llmd)
      m.sample(name, {{"fairness_id", id}, {"priority", pr}, {"inference_pool", kPoolName}}, v);
    else
      m.sample(name, {{"fairness_id", id}, {"priority", pr}}, v);
  };
  for (const auto& q : r.named) sample(*q.id, q.priority, bytes ? q.bytes : q.size);
  for (const auto& [p, v] : r.other) sample(observe::kOverflowLabel, p, bytes ? v.second : v.first);
}

}  // namespace

// Time in the queue by flow, and the queues per flow: the largest
// `max_flows` by queued bytes labelled, the rest summed per priority as
// fairness_id "(other)", which no flow id can be. Both names read the same
// rows, so llm-d's series are bounded as GIE's are.
void render_queues(observe::MetricsText& m, const DispatcherCopy& c, const FlowsSnapshot& flows,
                   std::size_t max_flows) {
  render_queue_durations(m, c);
  const QueueRows rows = queue_rows(flows, max_flows);
  m.family("inference_extension_flow_control_queue_size", "gauge", "Requests queued, by flow.");
  render_queue_gauge(m, rows, "inference_extension_flow_control_queue_size", false, false);
  m.family("inference_extension_flow_control_queue_bytes", "gauge",
           "Bytes of request bodies queued, by flow.");
  render_queue_gauge(m, rows, "inference_extension_flow_control_queue_bytes", true, false);
  m.family("llm_d_epp_flow_control_queue_size", "gauge",
           "[ALPHA] Current number of requests actively held in the Flow Control queue.");
  render_queue_gauge(m, rows, "llm_d_epp_flow_control_queue_size", false, true);
  m.family("llm_d_epp_flow_control_queue_bytes", "gauge",
           "[ALPHA] Current total size in bytes of requests actively held in the Flow Control "
           "queue.");
  render_queue_gauge(m, rows, "llm_d_epp_flow_control_queue_bytes", true, true);
}

// One saturation for the pool: llm-d's `effective` stage (sluice gates on
// one signal; it does not split prefill from decode).
void render_saturation(observe::MetricsText& m, const DispatcherCopy& c) {
  m.family("inference_extension_flow_control_pool_saturation", "gauge",
           "Pool saturation by the saturation detector (1: no endpoint has room).");
  m.sample("inference_extension_flow_control_pool_saturation", {}, c.pool_saturation);
  m.family("llm_d_epp_flow_control_pool_saturation", "gauge",
           "[ALPHA] Pool saturation signal gating Flow Control dispatch (sluice: the stage "
           "'effective' only; 1.0 is the gating set point).");
  m.sample("llm_d_epp_flow_control_pool_saturation",
           {{"inference_pool", kPoolName}, {"stage", "effective"}}, c.pool_saturation);
}

// GIE's inference_objective_* request families' llm_d_epp_* twins, by
// model (sluice keeps request statistics per model, not per model and flow:
// no fairness_id or priority label).
void render_llmd_requests(observe::MetricsText& m, const observe::ThreadStats& requests) {
  std::map<std::string, const observe::ModelStats*> sorted;
  for (const auto& [name, s] : requests.models) sorted[name] = &s;
  m.family("llm_d_epp_request_total", "counter", "[ALPHA] Total number of processed requests.");
  for (const auto& [name, s] : sorted)
    m.sample("llm_d_epp_request_total", {{"model_name", name}, {"target_model_name", name}},
             static_cast<double>(s->requests));
  m.family("llm_d_epp_request_error_total", "counter", "[ALPHA] Total number of request errors.");
  for (const auto& [name, s] : sorted) {
    std::map<std::string, std::uint64_t> codes(s->errors.begin(), s->errors.end());
    for (const auto& [code, n] : codes)
      m.sample("llm_d_epp_request_error_total",
               {{"model_name", name}, {"target_model_name", name}, {"error_code", code}},
               static_cast<double>(n));
  }
  m.family("llm_d_epp_request_duration_seconds", "histogram",
           "[ALPHA] End-to-end request latency distribution in seconds.");
  for (const auto& [name, s] : sorted)
    histogram(m, "llm_d_epp_request_duration_seconds",
              {{"model_name", name}, {"target_model_name", name}}, s->duration);
  m.family("llm_d_epp_request_ttft_seconds", "histogram",
           "[ALPHA] Time to first token in seconds, measured from request received to first "
           "response byte. For non-streaming requests, this equals total request duration.");
  for (const auto& [name, s] : sorted)
    for (int streaming : {0, 1})
      if (s->ttft[streaming].count() > 0)
        histogram(m, "llm_d_epp_request_ttft_seconds",
                  {{"model_name", name},
                   {"target_model_name", name},
                   {"streaming", streaming ? "true" : "false"}},
                  s->ttft[streaming]);
  m.family("llm_d_epp_request_input_tokens", "histogram",
           "[ALPHA] Input token count distribution per request.");
  for (const auto& [name, s] : sorted)
    histogram(m, "llm_d_epp_request_input_tokens",
              {{"model_name", name}, {"target_model_name", name}}, s->input_tokens);
  m.family("llm_d_epp_request_output_tokens", "histogram",
           "[ALPHA] Output token count distribution per request.");
  for (const auto& [name, s] : sorted)
    histogram(m, "llm_d_epp_request_output_tokens",
              {{"model_name", name}, {"target_model_name", name}}, s->output_tokens);
  m.family("llm_d_epp_request_running", "gauge",
           "[ALPHA] Current number of active running requests.");
  for (const auto& [name, s] : sorted)
    m.sample("llm_d_epp_request_running", {{"model_name", name}, {"target_model_name", name}},
             static_cast<double>(s->running));
}

namespace {

struct PoolStats {
  double kv = 0, queue = 0, running = 0;
  int ready = 0, with_metrics = 0;
  double mean(double total) const { return with_metrics ? total / with_metrics : 0; }
};

PoolStats pool_stats(proxy::ProxyContext& ctx) {
  PoolStats p;
  const auto fresh = ctx.config.saturation_detector.metrics_staleness_threshold;
  for (std::size_t i = 0; i < ctx.endpoints.size(); ++i) {
    const auto& ep = ctx.endpoints.at(i);
    if (ep.removed.load()) continue;
    const auto at = ep.metrics_ns.load(std::memory_order_acquire);
    if (at == 0) continue;
    ++p.with_metrics;
    p.kv += ep.kv_cache_usage.load();
    p.queue += ep.waiting.load();
    p.running += ep.running.load();
    if (datalayer::Clock::now() - datalayer::Clock::time_point(datalayer::Clock::duration(at)) <=
        fresh)
      ++p.ready;
  }
  return p;
}

// One pool gauge under GIE's name and llm-d's.
void pool_gauge(observe::MetricsText& m, std::string_view gie, std::string_view gie_help,
                std::string_view llmd, std::string_view llmd_help, double v) {
  m.family(gie, "gauge", gie_help);
  m.sample(gie, {{"name", kPoolName}}, v);
  m.family(llmd, "gauge", llmd_help);
  m.sample(llmd, {{"name", kPoolName}}, v);
}

// Each endpoint's queue (its scraped waiting requests), GIE's name and
// llm-d's; the endpoints are the configured ones (a bounded set).
void render_endpoint_queues(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  for (int pass = 0; pass < 2; ++pass) {
    const std::string_view name =
        pass == 0 ? "inference_pool_per_pod_queue_size" : "llm_d_epp_per_endpoint_queue_size";
    m.family(name, "gauge",
             pass == 0 ? "Requests waiting on each endpoint (its last scraped metrics)."
                       : "[ALPHA] The total number of requests pending in the model server "
                         "queue for each underlying endpoint.");
    for (std::size_t i = 0; i < ctx.endpoints.size(); ++i) {
      const auto& ep = ctx.endpoints.at(i);
      if (ep.removed.load() || ep.metrics_ns.load(std::memory_order_acquire) == 0) continue;
      m.sample(name,
               {{"name", kPoolName},
                {pass == 0 ? "model_server_pod" : "model_server_endpoint", ep.config.address}},
               ep.waiting.load());
    }
  }
}

}  // namespace

// The pool, from the scraped metrics. GIE's inference_pool_* names are the
// series llm-d still emits beside llm_d_epp_* (its deprecated twins, which
// autoscaling setups read); llm-d dropped the enableLegacyMetrics gate that
// once switched them, so both are always on, here as there.
void render_pool(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  const PoolStats p = pool_stats(ctx);
  pool_gauge(m, "inference_pool_average_kv_cache_utilization",
             "Mean KV-cache utilization of the pool's endpoints.",
             "llm_d_epp_average_kv_cache_utilization",
             "[ALPHA] The average kv cache utilization for an inference server pool.",
             p.mean(p.kv));
  pool_gauge(
      m, "inference_pool_average_queue_size",
      "Mean number of requests waiting on the pool's endpoints.", "llm_d_epp_average_queue_size",
      "[ALPHA] The average number of requests pending in the model server queue.", p.mean(p.queue));
  pool_gauge(m, "inference_pool_average_running_requests",
             "Mean number of requests running on the pool's endpoints.",
             "llm_d_epp_average_running_requests",
             "[ALPHA] The average number of running requests across model servers in the pool.",
             p.mean(p.running));
  pool_gauge(m, "inference_pool_ready_pods", "Endpoints with fresh metrics.",
             "llm_d_epp_ready_endpoints",
             "[ALPHA] The number of ready endpoints in the inference server pool.", p.ready);
  render_endpoint_queues(m, ctx);
}

// Scheduler timings: whole cycles, and each plugin's calls.
void render_scheduler(observe::MetricsText& m, const DispatcherCopy& c) {
  if (c.timings.empty()) return;
  const auto& bounds = scheduling::Timing::kBounds;
  for (int pass = 0; pass < 2; ++pass) {
    const std::string_view e2e = pass == 0 ? "inference_extension_scheduler_e2e_duration_seconds"
                                           : "llm_d_epp_scheduler_e2e_duration_seconds";
    const std::string_view plugin = pass == 0 ? "inference_extension_plugin_duration_seconds"
                                              : "llm_d_epp_plugin_duration_seconds";
    m.family(e2e, "histogram",
             pass == 0 ? "One scheduling cycle, all profiles."
                       : "[ALPHA] End-to-end scheduling latency distribution in seconds.");
    for (const auto& t : c.timings)
      if (t.extension_point == "Cycle") m.histogram(e2e, {}, bounds, t.counts, t.sum_seconds);
    m.family(plugin, "histogram",
             pass == 0 ? "One call of a scheduling plugin."
                       : "[ALPHA] Plugin processing latency distribution in seconds for each "
                         "extension point, plugin type and plugin name.");
    for (const auto& t : c.timings) {
      if (t.extension_point == "Cycle") continue;
      m.histogram(plugin,
                  {{"extension_point", t.extension_point},
                   {"plugin_type", t.type},
                   {"plugin_name", t.name}},
                  bounds, t.counts, t.sum_seconds);
    }
  }
}

}  // namespace sluice::admin
