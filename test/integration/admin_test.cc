// The admin plane with real processes: health, readiness, flows, bands,
// endpoints, the bearer token, and bad input that changes nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "flow_control_harness.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::string admin_config(const std::string& endpoint) {
  return "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n  - address: " + endpoint +
         "\nfeatureGates: [flowControl]\nflows:\n  - id: configured-tenant\n    weight: 2\n";
}

TEST(Admin, HealthReadinessAndEndpoints) {
  auto mock = start_mock();
  ClosedPort refusing;  // held until the test ends
  const std::string dead = refusing.address();
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg);
  ASSERT_NE(sluice->admin_port(), 0);
  HttpClient admin(kHost, sluice->admin_port());
  EXPECT_EQ(admin.request("GET", "/healthz").status, 200);
  EXPECT_TRUE(eventually([&] { return admin.request("GET", "/readyz").status == 200; }));
  auto eps = admin.request("GET", "/admin/v1/endpoints");
  ASSERT_EQ(eps.status, 200);
  auto j = json::parse(eps.body);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["address"], mock->address());
  EXPECT_TRUE(j[0]["healthy"].get<bool>());
  ASSERT_TRUE(j[0]["metrics"].is_object());
  EXPECT_LT(j[0]["metrics"]["ageMs"].get<double>(), 5000);
  EXPECT_EQ(admin.request("GET", "/admin/v1/nope").status, 404);
  EXPECT_EQ(admin.request("POST", "/healthz").status, 405);

  // Only a dead endpoint: alive, not ready.
  TempFile dead_cfg(admin_config(dead));
  auto lonely = start_sluice(dead_cfg);
  HttpClient admin2(kHost, lonely->admin_port());
  EXPECT_EQ(admin2.request("GET", "/healthz").status, 200);
  auto r = admin2.request("GET", "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("no endpoint with fresh metrics"), std::string::npos);
}

TEST(Admin, FlowsListAndOverridesWithValidation) {
  auto mock = start_mock();
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  HttpClient admin(kHost, sluice->admin_port());
  for (const char* f : {"tenant-a", "tenant-b", "tenant-a"}) {
    auto r = client.post_json("/v1/completions", completion_body(1),
                              {{"x-gateway-inference-fairness-id", f}});
    ASSERT_EQ(r.status, 200);
  }
  auto flows = json::parse(admin.request("GET", "/admin/v1/flows").body);
  std::map<std::string, std::uint64_t> dispatched;
  for (const auto& f : flows) dispatched[f["id"]] = f["dispatched"];
  EXPECT_EQ(dispatched["tenant-a"], 2u);
  EXPECT_EQ(dispatched["tenant-b"], 1u);

  auto put = [&](const std::string& id, const std::string& body) {
    return admin.request("PUT", "/admin/v1/flows/" + id, body,
                         {{"Content-Type", "application/json"}});
  };
  auto r = put("tenant-a", R"({"weight": 3, "maxQueued": 10})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto one = json::parse(admin.request("GET", "/admin/v1/flows/tenant-a").body);
  EXPECT_EQ(one["override"]["weight"], 3);
  EXPECT_EQ(one["override"]["maxQueued"], 10);
  EXPECT_EQ(one["flows"][0]["weight"], 3);

  // Bad input: status, code, message; the override stays as it was.
  struct Bad {
    std::string id, body;
    int status;
    std::string code;
  } bad[] = {
      {"tenant-a", "{not json", 400, "invalid-json"},
      {"tenant-a", R"({"weight": 2, "colour": "red"})", 400, "unknown-field"},
      {"tenant-a", R"({"weight": 0})", 400, "invalid-field"},
      {"tenant-a", R"({"weight": -1})", 400, "invalid-field"},
      {"tenant-a", R"({"priority": 1.5})", 400, "invalid-field"},
      {"tenant-a", R"({})", 400, "invalid-field"},
      {"no-such-tenant", R"({"weight": 2})", 404, "unknown-flow"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.body);
    auto res = put(b.id, b.body);
    EXPECT_EQ(res.status, b.status) << res.body;
    auto e = json::parse(res.body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << res.body;
    EXPECT_EQ(e["error"]["code"], b.code);
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  }
  one = json::parse(admin.request("GET", "/admin/v1/flows/tenant-a").body);
  EXPECT_EQ(one["override"], json({{"weight", 3}, {"maxQueued", 10}}));
  EXPECT_EQ(admin.request("GET", "/admin/v1/flows/no-such-tenant").status, 404);
  // A flow named in the config exists before its first request.
  EXPECT_EQ(put("configured-tenant", R"({"priority": 5})").status, 200);

  EXPECT_EQ(admin.request("DELETE", "/admin/v1/flows/tenant-a").status, 200);
  one = json::parse(admin.request("GET", "/admin/v1/flows/tenant-a").body);
  EXPECT_EQ(one["override"], json::object());
  EXPECT_EQ(one["flows"][0]["weight"], 1);
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/flows/tenant-a").status, 404);

  auto bands = json::parse(admin.request("GET", "/admin/v1/bands").body);
  ASSERT_GE(bands.size(), 1u);
  EXPECT_EQ(bands[0]["fairnessPolicy"], "global-strict-fairness-policy");
  // Requests kept flowing through all of it.
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
}

TEST(Admin, MutationsNeedTheBearerToken) {
  auto mock = start_mock();
  TempFile token("s3cret-token\n", "token");
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg, {"--admin-token-file", token.path()});
  HttpClient client(kHost, sluice->port());
  ASSERT_EQ(client
                .post_json("/v1/completions", completion_body(1),
                           {{"x-gateway-inference-fairness-id", "t"}})
                .status,
            200);
  HttpClient admin(kHost, sluice->admin_port());
  const Headers json_ct = {{"Content-Type", "application/json"}};
  Headers right = json_ct;
  right.emplace_back("Authorization", "Bearer s3cret-token");
  // Every route but the probes needs the token, reads included: flows,
  // bands, endpoints and drain state name tenants and traffic; /metrics
  // too unless server.adminOpenMetrics.
  for (const char* path :
       {"/admin/v1/flows", "/admin/v1/flows/t", "/admin/v1/bands", "/admin/v1/bands/0",
        "/admin/v1/endpoints", "/admin/v1/drain", "/metrics"}) {
    SCOPED_TRACE(path);
    auto r = admin.request("GET", path);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.header("www-authenticate"), "Bearer");
    EXPECT_NE(r.body.find("unauthorized"), std::string::npos);
    EXPECT_EQ(r.body.find("\"t\""), std::string::npos) << r.body;  // nothing about tenants
  }
  EXPECT_EQ(admin.request("GET", "/admin/v1/flows", "", right).status, 200);
  EXPECT_EQ(admin.request("GET", "/metrics", "", right).status, 200);
  EXPECT_EQ(admin.request("GET", "/healthz").status, 200);
  EXPECT_NE(admin.request("GET", "/readyz").status, 401);
  auto none = admin.request("PUT", "/admin/v1/flows/t", R"({"weight": 4})", json_ct);
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.body.find("unauthorized"), std::string::npos);
  Headers wrong = json_ct;
  wrong.emplace_back("Authorization", "Bearer s3cret-tokeN");
  EXPECT_EQ(admin.request("PUT", "/admin/v1/flows/t", R"({"weight": 4})", wrong).status, 401);
  EXPECT_EQ(json::parse(admin.request("GET", "/admin/v1/flows/t", "", right).body)["override"],
            json::object());
  EXPECT_EQ(admin.request("PUT", "/admin/v1/flows/t", R"({"weight": 4})", right).status, 200);
  // The scheme in any case, as the data plane reads it (RFC 7235); the
  // token itself still exactly.
  for (const char* scheme : {"bearer", "BEARER", "bEaReR"}) {
    SCOPED_TRACE(scheme);
    Headers other_case = json_ct;
    other_case.emplace_back("Authorization", std::string(scheme) + " s3cret-token");
    EXPECT_EQ(admin.request("GET", "/admin/v1/flows", "", other_case).status, 200);
    EXPECT_EQ(admin.request("PUT", "/admin/v1/flows/t", R"({"weight": 5})", other_case).status,
              200);
    other_case.back().second = std::string(scheme) + " S3CRET-TOKEN";
    EXPECT_EQ(admin.request("GET", "/admin/v1/flows", "", other_case).status, 401);
  }
  Headers no_space = json_ct;
  no_space.emplace_back("Authorization", "Bearers3cret-token");
  EXPECT_EQ(admin.request("GET", "/admin/v1/flows", "", no_space).status, 401);
}

TEST(Admin, MetricsOpenWithTokenOnlyWhenConfigured) {
  auto mock = start_mock();
  TempFile token("s3cret-token\n", "token");
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  adminOpenMetrics: true\n"
      "endpoints:\n  - address: " +
      mock->address() + "\n");
  auto sluice = start_sluice(cfg, {"--admin-token-file", token.path()});
  HttpClient admin(kHost, sluice->admin_port());
  auto m = admin.request("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("sluice_flows"), std::string::npos);
  EXPECT_EQ(admin.request("GET", "/admin/v1/flows").status, 401);
}

TEST(Admin, RefusesANonLoopbackAdminAddressWithoutAToken) {
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n");
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "0.0.0.0:0"}, o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->wait(std::chrono::milliseconds(10000)), 2);
  EXPECT_NE(p->stderr_text().find("refusing to start"), std::string::npos) << p->stderr_text();
  EXPECT_NE(p->stderr_text().find("without a token"), std::string::npos) << p->stderr_text();
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// /metrics under load passes promtool's linter and carries GIE's names
// and llm-d's.
TEST(Admin, MetricsPassPromtoolUnderLoad) {
  SLUICE_REQUIRE(run_shell("command -v promtool >/dev/null") == 0, "promtool",
                 "Debian package prometheus; scripts/install-deps.sh installs it");
  auto mock = start_mock({"--decode-ms-per-token", "5"});
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg);
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  std::mutex mu;
  std::map<int, int> statuses;
  for (int t = 0; t < 3; ++t)
    load.emplace_back([&, t] {
      HttpClient c(kHost, sluice->port());
      for (int i = 0; i < 200 && !stop; ++i) {
        auto res = c.post_json("/v1/completions", completion_body(4),
                               {{"x-gateway-inference-fairness-id", "t" + std::to_string(t)}});
        std::lock_guard lock(mu);
        statuses[res.status] += 1;
      }
    });
  HttpClient admin(kHost, sluice->admin_port());
  ASSERT_TRUE(
      eventually([&] { return scrape_metric(kHost, mock->port(), "mock_requests_total") >= 20; }));
  // One error with a known model: an invalid TTL header.
  HttpClient bad(kHost, sluice->port());
  EXPECT_EQ(
      bad.post_json("/v1/completions", completion_body(1), {{"x-gateway-inference-ttl-ms", "soon"}})
          .status,
      400);
  auto r = admin.request("GET", "/metrics");
  stop = true;
  for (auto& t : load) t.join();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4");
  for (const char* name : {"inference_extension_flow_control_queue_size",
                           "inference_extension_flow_control_queue_bytes",
                           "inference_extension_flow_control_pool_saturation",
                           "inference_pool_average_kv_cache_utilization",
                           "inference_pool_average_queue_size",
                           "inference_pool_ready_pods",
                           "inference_extension_scheduler_e2e_duration_seconds_bucket",
                           "inference_extension_plugin_duration_seconds_bucket",
                           "sluice_dispatcher_wakeups_total",
                           "sluice_endpoint_in_flight",
                           "inference_objective_request_total{model_name=\"mock-model\"",
                           "inference_objective_request_error_total{model_name=\"mock-model\","
                           "target_model_name=\"mock-model\","
                           "error_code=\"invalid-ttl\"} 1",
                           "inference_objective_request_duration_seconds_bucket",
                           "inference_objective_input_tokens_bucket",
                           "inference_objective_output_tokens_bucket",
                           "inference_objective_running_requests",
                           "inference_extension_flow_control_request_queue_duration_seconds_bucket{"
                           "fairness_id=\"t0\",priority=\"0\","
                           "outcome=\"Dispatched\"",
                           "sluice_requests_total{outcome=\"served\"}",
                           "sluice_upstream_connections_total",
                           "sluice_upstream_errors_total",
                           "sluice_dispatcher_events_total",
                           "llm_d_epp_flow_control_queue_size",
                           "llm_d_epp_flow_control_request_queue_duration_seconds_bucket",
                           "llm_d_epp_request_total{model_name=\"mock-model\"",
                           "llm_d_epp_ready_endpoints{name=\"sluice\"}",
                           "llm_d_epp_plugin_duration_seconds_bucket"})
    EXPECT_NE(r.body.find(name), std::string::npos) << name;
  TempFile scrape(r.body, "metrics.txt");
  const std::string cmd = "promtool check metrics < " + scrape.path() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  // promtool exits 1 on a parse error, 3 on lint findings only. No lint
  // finding but one: promtool reads the "d" of llm-d's own prefix
  // llm_d_epp_ as an abbreviated unit (days), on every llm_d_epp_ family as
  // on llm-d's exposition. Anything else (a parse error, another finding)
  // fails.
  std::size_t llmd_findings = 0, other_findings = 0;
  for (std::size_t at = 0; at < out.size();) {
    auto end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    if (line.rfind("llm_d_epp_", 0) == 0 &&
        line.find(" metric names should not contain abbreviated units") != std::string::npos &&
        line.find(' ') == line.find(" metric names"))
      ++llmd_findings;
    else
      ++other_findings;
  }
  const int rc = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(rc)) << out;
  EXPECT_EQ(WEXITSTATUS(rc), 3) << out;  // lint findings, not a parse error
  EXPECT_EQ(other_findings, 0u) << out;
  EXPECT_GT(llmd_findings, 0u) << out;  // the llm_d_epp_ families are there

  // After the load: the counts are exact. Every request the clients sent
  // is counted once, served or not; none is running.
  int sent = 0;
  for (const auto& [status, n] : statuses) sent += n;
  auto after = admin.request("GET", "/metrics").body;
  auto value = [&](const std::string& series) {
    auto at = after.find("\n" + series + " ");
    return at == std::string::npos ? -1.0 : std::stod(after.substr(at + series.size() + 2));
  };
  EXPECT_EQ(value("inference_objective_request_total{model_name=\"mock-model\",target_model_name="
                  "\"mock-model\"}"),
            sent + 1);
  EXPECT_EQ(value("sluice_requests_total{outcome=\"served\"}"), statuses[200]);
  EXPECT_EQ(value("inference_objective_request_duration_seconds_count{model_name=\"mock-model\","
                  "target_model_name=\"mock-model\"}"),
            statuses[200]);
  EXPECT_EQ(value("inference_objective_running_requests{model_name=\"mock-model\"}"), 0);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Pinning a flow to a higher priority moves its queued requests to that
// band: they overtake requests that were queued before them.
TEST(Admin, PinnedFlowOvertakesWhatWasQueuedBeforeIt) {
  auto mock = start_mock();
  TempFile cfg(fc_config(mock->address(), 1, "global-strict-fairness-policy"));
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  std::mutex mu;
  // Each request's flow by the mock's response number ("cmpl-N", numbered
  // as requests arrive there). With one request at a time the next is
  // dispatched only after the previous one's response: that is dispatch
  // order, whatever order the client threads see their responses in.
  std::map<long, std::string> order;
  std::vector<std::thread> clients;
  struct Joiner {  // also when an assertion leaves early
    std::vector<std::thread>& threads;
    ~Joiner() {
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{clients};
  {
    Occupier hold(sluice->port(), *mock);
    auto queued = [&](const std::string& id) {
      auto j = json::parse(admin.request("GET", "/admin/v1/flows").body);
      std::uint64_t n = 0;
      for (const auto& f : j)
        if (f["id"] == id) n += f["queued"].get<std::uint64_t>();
      return n;
    };
    auto send = [&](const std::string& id) {
      clients.emplace_back([&, id] {
        HttpClient c(kHost, sluice->port(), 30000ms);
        auto r = c.post_json("/v1/completions", completion_body(1), flow(id));
        EXPECT_EQ(r.status, 200) << r.body;
        const auto body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
        const std::string response_id = body.is_object() ? body.value("id", "") : "";
        EXPECT_EQ(response_id.rfind("cmpl-", 0), 0u) << r.body;
        if (response_id.rfind("cmpl-", 0) != 0) return;
        std::lock_guard lock(mu);
        order.emplace(std::strtol(response_id.c_str() + 5, nullptr, 10), id);
      });
    };
    for (int i = 0; i < 3; ++i) send("early");
    ASSERT_TRUE(eventually([&] { return queued("early") == 3; }));
    for (int i = 0; i < 3; ++i) send("pinned");
    ASSERT_TRUE(eventually([&] { return queued("pinned") == 3; }));
    auto r = admin.request("PUT", "/admin/v1/flows/pinned", R"({"priority": 100})",
                           {{"Content-Type", "application/json"}});
    ASSERT_EQ(r.status, 200) << r.body;
    // Moved, not copied or dropped: all three now queue at priority 100 (the
    // emptied flow at priority 0 is collected when idle).
    std::map<int, std::uint64_t> by_priority;
    const json pinned = json::parse(admin.request("GET", "/admin/v1/flows/pinned").body);
    for (const auto& f : pinned["flows"])
      by_priority[f["priority"].get<int>()] += f["queued"].get<std::uint64_t>();
    EXPECT_EQ(by_priority[100], 3u);
    EXPECT_EQ(by_priority[0], 0u);
  }  // the occupier finishes: the slot frees, one request at a time
  for (auto& t : clients) t.join();
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), 6u);
  std::vector<std::string> flows;
  for (const auto& [n, id] : order) flows.push_back(id);
  EXPECT_EQ(flows,
            (std::vector<std::string>{"pinned", "pinned", "pinned", "early", "early", "early"}));
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Bands added, changed and removed at runtime; bad input changes nothing.
TEST(Admin, BandsChangeAtRuntimeWithValidation) {
  auto mock = start_mock();
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  const Headers ct = {{"Content-Type", "application/json"}};
  EXPECT_EQ(admin.request("GET", "/admin/v1/bands/50").status, 404);
  auto r = admin.request(
      "PUT", "/admin/v1/bands/50",
      R"({"maxRequests": 7, "fairnessPolicy": "vtc-fairness-policy", "antiStarvationShare": 0.2})",
      ct);
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = json::parse(admin.request("GET", "/admin/v1/bands/50").body);
  EXPECT_EQ(b["maxRequests"], 7);
  EXPECT_EQ(b["fairnessPolicy"], "vtc-fairness-policy");
  EXPECT_EQ(b["configured"], true);
  struct Bad {
    std::string target, body;
    int status;
    std::string code;
  } bad[] = {
      {"/admin/v1/bands/50", "[1,2]", 400, "invalid-json"},
      {"/admin/v1/bands/50", R"({"fairnessPolicy": "fastest-first"})", 400, "invalid-field"},
      {"/admin/v1/bands/50", R"({"antiStarvationShare": 1.5})", 400, "invalid-field"},
      {"/admin/v1/bands/50", R"({"maxRequests": -3})", 400, "invalid-field"},
      {"/admin/v1/bands/50", R"({"maxRequest": 3})", 400, "unknown-field"},
      {"/admin/v1/bands/high", R"({"maxRequests": 3})", 400, "invalid-priority"},
  };
  for (const auto& x : bad) {
    SCOPED_TRACE(x.body);
    auto res = admin.request("PUT", x.target, x.body, ct);
    EXPECT_EQ(res.status, x.status) << res.body;
    EXPECT_EQ(json::parse(res.body)["error"]["code"], x.code);
  }
  EXPECT_EQ(json::parse(admin.request("GET", "/admin/v1/bands/50").body), b);  // unchanged
  // Requests at the new band's priority are served through all of this.
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/bands/50").status, 200);
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/bands/50").status, 404);
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/bands/12345").status, 404);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Issue 33, rough edge 12: admin values that make no sense were accepted: a
// subnormal weight (a VTC cost per token of infinity), JSON followed by a
// NUL byte, `bands/-0` and `bands/01` (two more names for band 0), and an
// antiStarvationShare of -0.0. Each is refused, 400 with its code, and
// nothing changes.
TEST(Admin, ValuesThatMakeNoSenseAreRefusedAndChangeNothing) {
  auto mock = start_mock();
  TempFile cfg(admin_config(mock->address()));
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  const Headers json_ct = {{"Content-Type", "application/json"}};
  auto expect_400 = [&](const std::string& method, const std::string& target,
                        const std::string& body, const std::string& code) {
    SCOPED_TRACE(method + " " + target + " " + body);
    auto r = admin.request(method, target, body, json_ct);
    EXPECT_EQ(r.status, 400) << r.body;
    auto j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_EQ(j["error"]["code"], code) << r.body;
  };
  const auto flow_before = admin.request("GET", "/admin/v1/flows/configured-tenant").body;
  const auto bands_before = admin.request("GET", "/admin/v1/bands").body;
  expect_400("PUT", "/admin/v1/flows/configured-tenant", R"({"weight":1e-320})", "invalid-field");
  expect_400("PUT", "/admin/v1/flows/configured-tenant", R"({"weight":1e-7})", "invalid-field");
  expect_400("PUT", "/admin/v1/flows/configured-tenant", std::string(R"({"weight":3})") + '\0',
             "invalid-json");
  expect_400("PUT", "/admin/v1/flows/configured-tenant",
             std::string(R"({"weight":3})") + '\0' + "garbage", "invalid-json");
  expect_400("PUT", "/admin/v1/bands/0", std::string(R"({"maxRequests":5})") + '\0',
             "invalid-json");
  expect_400("PUT", "/admin/v1/bands/0", R"({"antiStarvationShare":-0.0})", "invalid-field");
  for (const char* alias : {"-0", "01", "+0", "00", "-01"}) {
    expect_400("GET", std::string("/admin/v1/bands/") + alias, "", "invalid-priority");
    expect_400("PUT", std::string("/admin/v1/bands/") + alias, R"({"maxRequests":5})",
               "invalid-priority");
  }
  EXPECT_EQ(admin.request("GET", "/admin/v1/flows/configured-tenant").body, flow_before);
  EXPECT_EQ(admin.request("GET", "/admin/v1/bands").body, bands_before);
  // Values in range still apply: the smallest weight, a share of 0, band 0.
  EXPECT_EQ(
      admin.request("PUT", "/admin/v1/flows/configured-tenant", R"({"weight":0.000001})", json_ct)
          .status,
      200);
  EXPECT_EQ(
      admin.request("PUT", "/admin/v1/bands/0", R"({"antiStarvationShare":0})", json_ct).status,
      200);
  EXPECT_EQ(admin.request("GET", "/admin/v1/bands/0").status, 200);
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
}

}  // namespace
}  // namespace sluice::test
