// /metrics of a running sluice carries llm-d's llm_d_epp_* names beside
// GIE's (issue 40, item 5): every llm-d family has its TYPE line, llm-d's
// label names, and sample for sample the value of its GIE-named twin.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "flow_control_harness.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> type
  std::set<std::string> helps;
  std::vector<Sample> samples;
};

// The subset of the text format sluice writes: no escapes in the values
// these families carry (model, flow and plugin names of this test).
Exposition parse(const std::string& text) {
  Exposition e;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      const auto sp = line.find(' ', 7);
      e.types[line.substr(7, sp - 7)] = line.substr(sp + 1);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      e.helps.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    const auto brace = line.find('{');
    const auto space = line.rfind(' ');
    s.name = line.substr(0, std::min(brace, space));
    s.value = line.substr(space + 1);
    if (brace != std::string::npos && brace < space) {
      std::size_t p = brace + 1;
      while (line[p] != '}') {
        const auto eq = line.find("=\"", p);
        const auto close = line.find('"', eq + 2);
        s.labels[line.substr(p, eq - p)] = line.substr(eq + 2, close - eq - 2);
        p = close + 1;
        if (line[p] == ',') ++p;
      }
    }
    e.samples.push_back(std::move(s));
  }
  return e;
}

std::vector<const Sample*> family(const Exposition& e, const std::string& f, bool histogram) {
  std::vector<const Sample*> out;
  for (const auto& s : e.samples)
    if (s.name == f ||
        (histogram && (s.name == f + "_bucket" || s.name == f + "_sum" || s.name == f + "_count")))
      out.push_back(&s);
  return out;
}

struct Twin {
  std::string gie, llmd, type;
  std::map<std::string, std::string> added;  // "=model_name": that label's value
  std::map<std::string, std::string> renamed;
  bool may_be_empty = false;
};

// The llm-d labels of a GIE sample.
std::map<std::string, std::string> llmd_labels(const Twin& t, const Sample& s) {
  std::map<std::string, std::string> l;
  for (const auto& [k, v] : s.labels) l[t.renamed.count(k) ? t.renamed.at(k) : k] = v;
  for (const auto& [k, v] : t.added) l[k] = v.rfind('=', 0) == 0 ? s.labels.at(v.substr(1)) : v;
  return l;
}

const std::vector<Twin>& twins() {
  static const std::vector<Twin> kTwins = {
      {"inference_extension_flow_control_queue_size",
       "llm_d_epp_flow_control_queue_size",
       "gauge",
       {{"inference_pool", "sluice"}},
       {},
       true},
      {"inference_extension_flow_control_queue_bytes",
       "llm_d_epp_flow_control_queue_bytes",
       "gauge",
       {{"inference_pool", "sluice"}},
       {},
       true},
      {"inference_extension_flow_control_request_queue_duration_seconds",
       "llm_d_epp_flow_control_request_queue_duration_seconds",
       "histogram",
       {{"inference_pool", "sluice"}},
       {}},
      {"inference_extension_flow_control_pool_saturation",
       "llm_d_epp_flow_control_pool_saturation",
       "gauge",
       {{"inference_pool", "sluice"}, {"stage", "effective"}},
       {}},
      {"inference_objective_request_total", "llm_d_epp_request_total", "counter", {}, {}},
      {"inference_objective_request_error_total",
       "llm_d_epp_request_error_total",
       "counter",
       {},
       {}},
      {"inference_objective_request_duration_seconds",
       "llm_d_epp_request_duration_seconds",
       "histogram",
       {},
       {}},
      {"inference_objective_input_tokens", "llm_d_epp_request_input_tokens", "histogram", {}, {}},
      {"inference_objective_output_tokens", "llm_d_epp_request_output_tokens", "histogram", {}, {}},
      {"inference_objective_running_requests",
       "llm_d_epp_request_running",
       "gauge",
       {{"target_model_name", "=model_name"}},
       {}},
      {"inference_pool_average_kv_cache_utilization",
       "llm_d_epp_average_kv_cache_utilization",
       "gauge",
       {},
       {}},
      {"inference_pool_average_queue_size", "llm_d_epp_average_queue_size", "gauge", {}, {}},
      {"inference_pool_average_running_requests",
       "llm_d_epp_average_running_requests",
       "gauge",
       {},
       {}},
      {"inference_pool_ready_pods", "llm_d_epp_ready_endpoints", "gauge", {}, {}},
      {"inference_pool_per_pod_queue_size",
       "llm_d_epp_per_endpoint_queue_size",
       "gauge",
       {},
       {{"model_server_pod", "model_server_endpoint"}}},
      {"inference_extension_scheduler_e2e_duration_seconds",
       "llm_d_epp_scheduler_e2e_duration_seconds",
       "histogram",
       {},
       {}},
      {"inference_extension_plugin_duration_seconds",
       "llm_d_epp_plugin_duration_seconds",
       "histogram",
       {},
       {}},
  };
  return kTwins;
}

TEST(MetricsLlmd, EveryLlmdNameBesideItsGieTwinWithTheSameValues) {
  auto mock = start_mock();
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 2\nendpoints:\n  - address: " +
               mock->address() + "\nfeatureGates: [flowControl]\n");
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  // The endpoint's metrics scraped: the pool gauges have a value.
  ASSERT_TRUE(eventually([&] {
    return admin.request("GET", "/metrics")
               .body.find("\ninference_pool_ready_pods{name=\"sluice\"} 1\n") != std::string::npos;
  }));
  HttpClient c(kHost, sluice->port());
  for (int i = 0; i < 6; ++i)
    ASSERT_EQ(c.post_json("/v1/completions", completion_body(3),
                          {{"x-gateway-inference-fairness-id", "t" + std::to_string(i % 3)}})
                  .status,
              200);
  EXPECT_EQ(
      c.post_json("/v1/completions", completion_body(1), {{"x-gateway-inference-ttl-ms", "soon"}})
          .status,
      400);
  const auto r = admin.request("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  const Exposition e = parse(r.body);
  for (const auto& t : twins()) {
    SCOPED_TRACE(t.llmd);
    EXPECT_EQ(e.types.count(t.llmd) ? e.types.at(t.llmd) : "", t.type);
    EXPECT_EQ(e.types.count(t.gie) ? e.types.at(t.gie) : "", t.type);
    EXPECT_TRUE(e.helps.count(t.llmd));
    const bool h = t.type == "histogram";
    const auto gie = family(e, t.gie, h);
    const auto llmd = family(e, t.llmd, h);
    if (!t.may_be_empty) {
      EXPECT_FALSE(gie.empty());
    }
    ASSERT_EQ(gie.size(), llmd.size());
    for (std::size_t i = 0; i < gie.size(); ++i) {
      EXPECT_EQ(llmd[i]->name.substr(t.llmd.size()), gie[i]->name.substr(t.gie.size()));
      EXPECT_EQ(llmd[i]->labels, llmd_labels(t, *gie[i])) << gie[i]->name;
      EXPECT_EQ(llmd[i]->value, gie[i]->value) << gie[i]->name;
    }
  }
  // The requests counted as the GIE name counts them: 6 served, 1 error.
  const auto total = family(e, "llm_d_epp_request_total", false);
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(total[0]->value, "7");
  EXPECT_EQ(total[0]->labels.at("model_name"), "mock-model");
  const auto errors = family(e, "llm_d_epp_request_error_total", false);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]->labels.at("error_code"), "invalid-ttl");
}

// The value of `name`'s sample with labels that include `want` ("" if none).
std::string value_of(const Exposition& e, const std::string& name,
                     const std::map<std::string, std::string>& want) {
  for (const auto& s : e.samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : want) all = all && s.labels.count(k) && s.labels.at(k) == v;
    if (all) return s.value;
  }
  return "";
}

// promtool's findings on `text` other than the one every llm_d_epp_ family
// gets (it reads the "d" of llm-d's prefix as the unit days): "" when clean.
std::string promtool_findings(const std::string& text) {
  TempFile scrape(text, "metrics.txt");
  FILE* p = ::popen(("promtool check metrics < " + scrape.path() + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  std::string out, other;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  if (!WIFEXITED(rc) || (WEXITSTATUS(rc) != 0 && WEXITSTATUS(rc) != 3)) return "exit: " + out;
  for (std::size_t at = 0; at < out.size();) {
    auto end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(at, end - at);
    at = end + 1;
    if (line.empty() ||
        (line.rfind("llm_d_epp_", 0) == 0 &&
         line.find(" metric names should not contain abbreviated units") == line.find(' ')))
      continue;
    other += line + "\n";
  }
  return other;
}

// P/D with an inflight-load-producer named "load": a stream of 40 tokens,
// 100 ms each, holds a request on the decode endpoint for 4 s. Once its
// first event arrived, llm-d's producer has let the prompt tokens go on
// both endpoints and the prefill endpoint's request, and still counts the
// decode endpoint's request; when the client leaves, nothing is left. The
// disagg-profile-handler counts each request's prefill-decode decision.
TEST(MetricsLlmd, InflightLoadAndDisaggDecisionsOfARunningSluice) {
  SLUICE_REQUIRE(run_shell("command -v promtool >/dev/null") == 0, "promtool",
                 "Debian package prometheus; scripts/install-deps.sh installs it");
  auto prefill = start_mock(), decode = start_mock({"--decode-ms-per-token", "100"});
  TempFile cfg(R"(plugins:
- type: inflight-load-producer
  name: load
- type: always-disagg-pd-decider
- type: disagg-profile-handler
  parameters:
    deciderPluginName: always-disagg-pd-decider
- type: prefill-filter
- type: decode-filter
- type: token-load-scorer
- type: max-score-picker
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: token-load-scorer
  - pluginRef: max-score-picker
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: token-load-scorer
  - pluginRef: max-score-picker
server:
  listen: 127.0.0.1:0
  threads: 1
endpoints:
  - address: )" +
               prefill->address() + "\n    labels: {llm-d.ai/role: prefill}\n  - address: " +
               decode->address() + "\n    labels: {llm-d.ai/role: decode}\n");
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  const auto scrape = [&] { return parse(admin.request("GET", "/metrics").body); };
  const auto at = [&](const Exposition& e, const std::string& f, const std::string& ep) {
    return value_of(e, f, {{"endpoint_name", ep}, {"producer_name", "load"}});
  };
  HttpClient c(kHost, sluice->port());
  bool checked = false;
  c.stream("/v1/completions", completion_body(40, true), {},
           [&](const Response& head, const SseEvent&) {
             EXPECT_EQ(head.status, 200);
             checked = eventually([&] {
               const Exposition e = scrape();
               return at(e, "llm_d_epp_inflight_tokens", decode->address()) == "0" &&
                      at(e, "llm_d_epp_inflight_requests", decode->address()) == "1" &&
                      at(e, "llm_d_epp_inflight_tokens", prefill->address()) == "0" &&
                      at(e, "llm_d_epp_inflight_requests", prefill->address()) == "0";
             });
             return false;  // the client leaves
           });
  EXPECT_TRUE(checked) << admin.request("GET", "/metrics").body;
  EXPECT_TRUE(eventually(
      [&] { return at(scrape(), "llm_d_epp_inflight_requests", decode->address()) == "0"; }));
  // A stream and a whole answer served: one time to first byte each
  // (llm_d_epp_request_ttft_seconds, by streaming); three P/D decisions.
  HttpClient c2(kHost, sluice->port());
  EXPECT_TRUE(c2.stream("/v1/completions", completion_body(2, true)).complete);
  EXPECT_EQ(c2.post_json("/v1/completions", completion_body(2)).status, 200);
  // The I/O thread records a request once its answer is written: the
  // client may scrape first.
  const auto ttfts = [&](const Exposition& x) {
    return value_of(x, "llm_d_epp_request_ttft_seconds_count",
                    {{"model_name", "mock-model"}, {"streaming", "true"}}) +
           "," +
           value_of(x, "llm_d_epp_request_ttft_seconds_count",
                    {{"model_name", "mock-model"}, {"streaming", "false"}});
  };
  EXPECT_TRUE(eventually([&] { return ttfts(scrape()) == "1,1"; })) << ttfts(scrape());
  const std::string text = admin.request("GET", "/metrics").body;
  EXPECT_EQ(promtool_findings(text), "");
  const Exposition e = parse(text);
  EXPECT_EQ(
      e.types.count("llm_d_epp_inflight_requests") ? e.types.at("llm_d_epp_inflight_requests") : "",
      "gauge");
  EXPECT_EQ(e.types.count("llm_d_epp_disagg_decision_total")
                ? e.types.at("llm_d_epp_disagg_decision_total")
                : "",
            "counter");
  const std::map<std::string, std::string> pd = {{"plugin_name", "disagg-profile-handler"},
                                                 {"plugin_type", "disagg-profile-handler"},
                                                 {"model_name", "mock-model"}};
  auto with = [&](std::string type) {
    auto l = pd;
    l["decision_type"] = std::move(type);
    return l;
  };
  EXPECT_EQ(value_of(e, "llm_d_epp_disagg_decision_total", with("prefill-decode")), "3");
  EXPECT_EQ(value_of(e, "llm_d_epp_disagg_decision_total", with("decode-only")), "0");
}

}  // namespace
}  // namespace sluice::test
