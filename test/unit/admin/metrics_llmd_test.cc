// llm-d's llm_d_epp_* names beside GIE's in /metrics (issue 40, item 5):
// each family's TYPE line and llm-d's label names, the same values as the
// GIE-named twin, and the per-flow series bounded by metricsMaxFlows as the
// GIE ones are. The expected lines are worked out by hand from the inputs.
#include <gtest/gtest.h>

#include <string>

#include "admin/metrics_sections.h"
#include "admin/plugin_metrics.h"

namespace sluice::admin {
namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

registry::FlowSummary flow(std::string id, int priority, std::size_t queued, std::uint64_t bytes) {
  registry::FlowSummary f;
  f.id = std::move(id);
  f.priority = priority;
  f.queued = queued;
  f.bytes = bytes;
  return f;
}

// Five flows, metricsMaxFlows 2: the two with the most queued bytes (c 500,
// a 300) keep their fairness_id; b (100) and d (50) at priority 0 sum to
// 6 requests, 150 bytes under "(other)"; e alone at priority 1 to 1, 10.
TEST(MetricsLlmd, QueuesBesideGieNamesAndBoundedByMaxFlows) {
  FlowsSnapshot flows;
  flows.flows = {flow("a", 0, 3, 300), flow("b", 0, 1, 100), flow("c", 1, 2, 500),
                 flow("d", 0, 5, 50), flow("e", 1, 1, 10)};
  DispatcherCopy copy;
  observe::MetricsText m;
  render_queues(m, copy, flows, 2);
  const std::string& t = m.text();
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_flow_control_queue_size gauge")) << t;
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_flow_control_queue_bytes gauge")) << t;
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_flow_control_request_queue_duration_seconds histogram"));
  const std::string pool = ",inference_pool=\"sluice\"}";
  for (const auto& [gie, llmd] : {std::pair{"inference_extension_flow_control_queue_size",
                                            "llm_d_epp_flow_control_queue_size"}}) {
    EXPECT_TRUE(has(t, std::string(gie) + "{fairness_id=\"c\",priority=\"1\"} 2")) << t;
    EXPECT_TRUE(has(t, std::string(llmd) + "{fairness_id=\"c\",priority=\"1\"" + pool + " 2"));
    EXPECT_TRUE(has(t, std::string(gie) + "{fairness_id=\"a\",priority=\"0\"} 3"));
    EXPECT_TRUE(has(t, std::string(llmd) + "{fairness_id=\"a\",priority=\"0\"" + pool + " 3"));
    EXPECT_TRUE(has(t, std::string(gie) + "{fairness_id=\"(other)\",priority=\"0\"} 6"));
    EXPECT_TRUE(
        has(t, std::string(llmd) + "{fairness_id=\"(other)\",priority=\"0\"" + pool + " 6"));
    EXPECT_TRUE(
        has(t, std::string(llmd) + "{fairness_id=\"(other)\",priority=\"1\"" + pool + " 1"));
  }
  EXPECT_TRUE(has(
      t, "llm_d_epp_flow_control_queue_bytes{fairness_id=\"c\",priority=\"1\"" + pool + " 500"));
  EXPECT_TRUE(has(
      t, "llm_d_epp_flow_control_queue_bytes{fairness_id=\"a\",priority=\"0\"" + pool + " 300"));
  EXPECT_TRUE(has(t, "llm_d_epp_flow_control_queue_bytes{fairness_id=\"(other)\",priority=\"0\"" +
                         pool + " 150"));
  EXPECT_TRUE(has(t, "llm_d_epp_flow_control_queue_bytes{fairness_id=\"(other)\",priority=\"1\"" +
                         pool + " 10"));
  for (const char* gone : {"\"b\"", "\"d\"", "\"e\""})
    EXPECT_EQ(t.find(gone), std::string::npos) << gone;
  // Four series per gauge and name: 2 named + 2 overflow rows.
  std::size_t llmd_size = 0;
  for (auto at = t.find("\nllm_d_epp_flow_control_queue_size{"); at != std::string::npos;
       at = t.find("\nllm_d_epp_flow_control_queue_size{", at + 1))
    ++llmd_size;
  EXPECT_EQ(llmd_size, 4u);
}

// A queue-duration series: GIE's labels, llm-d's add inference_pool; the
// same counts (two waits: 0.25 s in the 0.25 bucket, 0.5 s in 0.5).
TEST(MetricsLlmd, QueueDurationsCarryTheSameCounts) {
  DispatcherCopy copy;
  flowcontrol::QueueDurationSeries q;
  q.fairness_id = "t0";
  q.priority = 5;
  q.outcome = QueueOutcome::kEvictedTTL;
  q.histogram.record_seconds(0.25);
  q.histogram.record_seconds(0.5);
  copy.queue_durations.push_back(q);
  observe::MetricsText m;
  render_queues(m, copy, FlowsSnapshot{}, 10);
  const std::string& t = m.text();
  const std::string gie = "inference_extension_flow_control_request_queue_duration_seconds";
  const std::string llmd = "llm_d_epp_flow_control_request_queue_duration_seconds";
  const std::string labels = "fairness_id=\"t0\",priority=\"5\",outcome=\"EvictedTTL\"";
  EXPECT_TRUE(has(t, gie + "_bucket{" + labels + ",le=\"0.25\"} 1")) << t;
  EXPECT_TRUE(has(t, llmd + "_bucket{" + labels + ",inference_pool=\"sluice\",le=\"0.1\"} 0"));
  EXPECT_TRUE(has(t, llmd + "_bucket{" + labels + ",inference_pool=\"sluice\",le=\"0.25\"} 1"))
      << t;
  EXPECT_TRUE(has(t, llmd + "_bucket{" + labels + ",inference_pool=\"sluice\",le=\"0.5\"} 2"));
  EXPECT_TRUE(has(t, llmd + "_count{" + labels + ",inference_pool=\"sluice\"} 2"));
  EXPECT_TRUE(has(t, llmd + "_sum{" + labels + ",inference_pool=\"sluice\"} 0.75"));
}

TEST(MetricsLlmd, SaturationIsTheEffectiveStage) {
  DispatcherCopy copy;
  copy.pool_saturation = 0.75;
  observe::MetricsText m;
  render_saturation(m, copy);
  const std::string& t = m.text();
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_flow_control_pool_saturation gauge"));
  EXPECT_TRUE(has(t, "inference_extension_flow_control_pool_saturation 0.75")) << t;
  EXPECT_TRUE(has(t,
                  "llm_d_epp_flow_control_pool_saturation{inference_pool=\"sluice\","
                  "stage=\"effective\"} 0.75"))
      << t;
}

// Model m: 3 requests, one error "invalid-ttl", one served in 0.2 s with 10
// input and 5 output tokens, 2 running.
TEST(MetricsLlmd, RequestFamiliesEqualTheirGieTwins) {
  observe::ThreadStats stats;
  auto& s = stats.model("m");
  s.requests = 3;
  s.errors["invalid-ttl"] = 1;
  s.duration.record_seconds(0.2);
  s.input_tokens.record(10);
  s.output_tokens.record(5);
  s.running = 2;
  observe::MetricsText m;
  render_llmd_requests(m, stats);
  const std::string& t = m.text();
  const std::string ml = "model_name=\"m\",target_model_name=\"m\"";
  for (const auto& [name, type] : {std::pair{"llm_d_epp_request_total", "counter"},
                                   std::pair{"llm_d_epp_request_error_total", "counter"},
                                   std::pair{"llm_d_epp_request_duration_seconds", "histogram"},
                                   std::pair{"llm_d_epp_request_input_tokens", "histogram"},
                                   std::pair{"llm_d_epp_request_output_tokens", "histogram"},
                                   std::pair{"llm_d_epp_request_running", "gauge"}})
    EXPECT_TRUE(has(t, std::string("# TYPE ") + name + " " + type)) << name;
  EXPECT_TRUE(has(t, "llm_d_epp_request_total{" + ml + "} 3")) << t;
  EXPECT_TRUE(has(t, "llm_d_epp_request_error_total{" + ml + ",error_code=\"invalid-ttl\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_duration_seconds_bucket{" + ml + ",le=\"0.1\"} 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_duration_seconds_bucket{" + ml + ",le=\"0.25\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_duration_seconds_sum{" + ml + "} 0.2"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_input_tokens_bucket{" + ml + ",le=\"16\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_input_tokens_bucket{" + ml + ",le=\"8\"} 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_output_tokens_bucket{" + ml + ",le=\"8\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_output_tokens_sum{" + ml + "} 5"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_running{" + ml + "} 2"));
  // The GIE-named families render the same numbers.
  observe::MetricsText g;
  stats.render(g, {});
  EXPECT_TRUE(has(g.text(), "inference_objective_request_total{" + ml + "} 3"));
  EXPECT_TRUE(has(g.text(), "inference_objective_running_requests{model_name=\"m\"} 2"));
}

// llm-d's request_ttft_seconds (received to the first response byte), by
// model and streaming: model m streamed two answers, first bytes at 0.375 s
// and 0.0625 s (buckets 0.5 and 0.1; sum 0.4375), and one whole answer whose
// body came at 2 s (bucket 2.5); model n none, so no series for it.
TEST(MetricsLlmd, TtftByModelAndStreaming) {
  observe::ThreadStats stats;
  auto& s = stats.model("m");
  s.requests = 3;
  s.ttft[1].record_seconds(0.375);
  s.ttft[1].record_seconds(0.0625);
  s.ttft[0].record_seconds(2);
  stats.model("n").requests = 1;
  observe::MetricsText m;
  render_llmd_requests(m, stats);
  const std::string& t = m.text();
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_request_ttft_seconds histogram")) << t;
  const std::string st = "model_name=\"m\",target_model_name=\"m\",streaming=\"true\"";
  const std::string whole = "model_name=\"m\",target_model_name=\"m\",streaming=\"false\"";
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + st + ",le=\"0.05\"} 0")) << t;
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + st + ",le=\"0.1\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + st + ",le=\"0.25\"} 1"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + st + ",le=\"0.5\"} 2"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_sum{" + st + "} 0.4375"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_count{" + st + "} 2"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + whole + ",le=\"1\"} 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_request_ttft_seconds_bucket{" + whole + ",le=\"2.5\"} 1"));
  EXPECT_EQ(t.find("llm_d_epp_request_ttft_seconds_count{model_name=\"n\""), std::string::npos);
}

// One cycle of 3 µs (the 5e-6 bucket) and one scorer call of 40 µs (5e-5).
TEST(MetricsLlmd, SchedulerTimingsUnderBothNames) {
  DispatcherCopy copy;
  TimingCopy cycle{"Cycle", "", "", {}, 3e-6};
  cycle.counts[2] = 1;
  TimingCopy scorer{"Scorer", "queue-scorer", "q", {}, 4e-5};
  scorer.counts[5] = 1;
  copy.timings = {cycle, scorer};
  observe::MetricsText m;
  render_scheduler(m, copy);
  const std::string& t = m.text();
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_scheduler_e2e_duration_seconds histogram"));
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_plugin_duration_seconds histogram"));
  EXPECT_TRUE(has(t, "inference_extension_scheduler_e2e_duration_seconds_bucket{le=\"5e-06\"} 1"))
      << t;
  EXPECT_TRUE(has(t, "llm_d_epp_scheduler_e2e_duration_seconds_bucket{le=\"5e-06\"} 1")) << t;
  EXPECT_TRUE(has(t, "llm_d_epp_scheduler_e2e_duration_seconds_bucket{le=\"2e-06\"} 0"));
  const std::string pl =
      "extension_point=\"Scorer\",plugin_type=\"queue-scorer\",plugin_name=\"q\"";
  EXPECT_TRUE(has(t, "llm_d_epp_plugin_duration_seconds_bucket{" + pl + ",le=\"5e-05\"} 1")) << t;
  EXPECT_TRUE(has(t, "llm_d_epp_plugin_duration_seconds_bucket{" + pl + ",le=\"2e-05\"} 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_plugin_duration_seconds_count{" + pl + "} 1"));
}

// llm-d's per-plugin families (inflightload/metrics.go, disagg/metrics.go):
// a producer "load" with 2 requests and 130 tokens on the first endpoint,
// nothing on the second (a zero row, as sluice_endpoint_in_flight has), and
// a third endpoint it never charged (zero too); a handler "pd" that decided
// 3 prefill-decode and 1 decode-only for "llama".
TEST(MetricsLlmd, InflightLoadAndDisaggDecisionsWithLlmdsLabels) {
  flowcontrol::PluginMetricsCopy c;
  c.inflight.push_back({"load", {2, 0}, {130, 0}});
  c.disagg = true;
  c.decisions.push_back({"pd", "disagg-profile-handler", "llama", 1, 3});
  const std::vector<std::string> eps = {"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"};
  observe::MetricsText m;
  render_plugin_metrics(m, c, eps);
  const std::string& t = m.text();
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_inflight_requests gauge")) << t;
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_inflight_tokens gauge"));
  EXPECT_TRUE(has(t, "# TYPE llm_d_epp_disagg_decision_total counter"));
  const auto row = [](const char* ep) {
    return std::string("{endpoint_name=\"") + ep + "\",producer_name=\"load\"}";
  };
  EXPECT_TRUE(has(t, "llm_d_epp_inflight_requests" + row("10.0.0.1:8000") + " 2")) << t;
  EXPECT_TRUE(has(t, "llm_d_epp_inflight_requests" + row("10.0.0.2:8000") + " 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_inflight_requests" + row("10.0.0.3:8000") + " 0"));
  EXPECT_TRUE(has(t, "llm_d_epp_inflight_tokens" + row("10.0.0.1:8000") + " 130"));
  EXPECT_TRUE(has(t, "llm_d_epp_inflight_tokens" + row("10.0.0.3:8000") + " 0"));
  const std::string pd =
      "llm_d_epp_disagg_decision_total{plugin_name=\"pd\",plugin_type=\"disagg-profile-"
      "handler\",model_name=\"llama\",decision_type=";
  EXPECT_TRUE(has(t, pd + "\"prefill-decode\"} 3")) << t;
  EXPECT_TRUE(has(t, pd + "\"decode-only\"} 1"));
}

// Neither plugin configured: neither family.
TEST(MetricsLlmd, NoPluginFamiliesWithoutThePlugins) {
  observe::MetricsText m;
  render_plugin_metrics(m, flowcontrol::PluginMetricsCopy{}, std::vector<std::string>{"a:1"});
  EXPECT_EQ(m.text(), "");
}

}  // namespace
}  // namespace sluice::admin
