// The operator's runtime controls with real processes: config reload
// (POST /admin/v1/reload and SIGHUP, valid and invalid, under load), drain,
// graceful shutdown of queued requests, the access log and sluice-ctl.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

void rewrite(const TempFile& f, const std::string& contents) { ASSERT_TRUE(f.replace(contents)); }

// Requests from `threads` clients until stopped; every status counted.
class Load {
 public:
  Load(std::uint16_t port, int threads, std::vector<Headers> headers) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back(
          [this, port, h = headers[static_cast<std::size_t>(t) % headers.size()]] {
            HttpClient c(kHost, port, 20000ms);
            for (int i = 0; i < 5000 && !stop_; ++i) {
              auto r = c.post_json("/v1/completions", completion_body(2), h);
              std::lock_guard lock(mu_);
              statuses_[r.status] += 1;
              if (r.status != 200 && errors_.size() < 5)
                errors_.push_back(std::to_string(r.status) + " " + r.error + r.body);
            }
          });
  }
  ~Load() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  int total() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (auto& [s, c] : statuses_) n += c;
    return n;
  }
  std::map<int, int> statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }
  std::vector<std::string> errors() {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<int, int> statuses_;
  std::vector<std::string> errors_;
};

std::string reload_config(const std::vector<std::string>& endpoints, const std::string& extra) {
  std::string c = "server:\n  listen: 127.0.0.1:0\n  threads: 2\nendpoints:\n";
  for (const auto& e : endpoints) c += "  - address: " + e + "\n";
  c += "featureGates: [flowControl]\n"
       "plugins:\n"
       "  - type: concurrency-detector\n"
       "    parameters: {maxConcurrency: 4}\n"
       "saturationDetector: {pluginRef: concurrency-detector}\n"
       "objectives:\n"
       "  - {name: batch, priority: -1}\n" +
       extra;
  return c;
}

json get_json(HttpClient& admin, const std::string& path) {
  auto r = admin.request("GET", path);
  EXPECT_EQ(r.status, 200) << path << " " << r.body;
  return json::parse(r.body, nullptr, false);
}

bool has_band(HttpClient& admin, int priority) {
  for (const auto& b : get_json(admin, "/admin/v1/bands"))
    if (b["priority"] == priority && b["configured"].get<bool>()) return true;
  return false;
}

int live_endpoints(HttpClient& admin) {
  int n = 0;
  for (const auto& e : get_json(admin, "/admin/v1/endpoints"))
    n += e["removed"].get<bool>() ? 0 : 1;
  return n;
}

// Reload a valid config (new band, objective, weights, endpoint, scorer),
// then an invalid one (by HTTP and by SIGHUP), then a valid one by SIGHUP,
// all under load: not one request fails, and each change is visible.
TEST(Operator, ReloadValidAndInvalidUnderLoadLosesNothing) {
  auto mock_a = start_mock({"--decode-ms-per-token", "2"});
  auto mock_b = start_mock({"--decode-ms-per-token", "2"});
  TempFile cfg(reload_config({mock_a->address()}, ""));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  HttpClient admin(kHost, sluice->admin_port());
  Load load(sluice->port(), 4,
            {flow("tenant-a"), flow("tenant-b", "batch"), flow("tenant-c", "premium")});
  ASSERT_TRUE(eventually([&] { return load.total() >= 50; }, 10000ms));

  // Valid: a premium objective in its own band, tenant-a weighted 3, a
  // second endpoint, and a scheduling profile with the queue scorer.
  rewrite(
      cfg,
      "server:\n  listen: 127.0.0.1:0\n  threads: 2\nendpoints:\n  - address: " +
          mock_a->address() + "\n  - address: " + mock_b->address() +
          "\nfeatureGates: [flowControl]\n"
          "plugins:\n"
          "  - type: concurrency-detector\n"
          "    parameters: {maxConcurrency: 4}\n"
          "  - type: queue-scorer\n"
          "  - type: max-score-picker\n"
          "schedulingProfiles:\n  - name: default\n    plugins:\n      - pluginRef: queue-scorer\n"
          "      - pluginRef: max-score-picker\n"
          "saturationDetector: {pluginRef: concurrency-detector}\n"
          "objectives:\n  - {name: batch, priority: -1}\n  - {name: premium, priority: 10}\n"
          "flows:\n  - {id: tenant-a, weight: 3}\n"
          "flowControl:\n  priorityBands:\n    - {priority: 10, maxRequests: 50}\n");
  auto r = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(r.status, 200) << r.body;
  auto applied = json::parse(r.body)["applied"];
  for (const char* section :
       {"flowControl", "flows", "objectives", "plugins/schedulingProfiles", "endpoints"})
    EXPECT_NE(std::find(applied.begin(), applied.end(), section), applied.end())
        << section << " in " << r.body;
  EXPECT_TRUE(json::parse(r.body)["restartRequired"].empty()) << r.body;
  // Applied once the reply came: the band, the endpoint, the weight.
  EXPECT_TRUE(has_band(admin, 10));
  EXPECT_EQ(live_endpoints(admin), 2);
  // Every flow of tenant-a (one per band it has used) is weighted 3.
  const json tenant_a = get_json(admin, "/admin/v1/flows/tenant-a");
  ASSERT_TRUE(tenant_a["flows"].is_array() && !tenant_a["flows"].empty()) << tenant_a;
  for (const auto& f : tenant_a["flows"]) EXPECT_EQ(f["weight"], 3.0) << f;
  // New requests of the premium objective go to band 10; the new endpoint serves.
  EXPECT_TRUE(eventually(
      [&] {
        const json tenant_c = get_json(admin, "/admin/v1/flows/tenant-c");
        for (const auto& f : tenant_c["flows"])
          if (f["band"] == 10 && f["dispatched"].get<int>() > 0) return true;
        return false;
      },
      10000ms));
  EXPECT_TRUE(eventually(
      [&] { return scrape_metric(kHost, mock_b->port(), "mock_requests_total") >= 5; }, 10000ms));

  // Invalid (an unknown field): 400 with the file's line, nothing changes.
  const std::string valid_text = [&] {
    std::ifstream in(cfg.path());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  rewrite(cfg, valid_text + "flowControll: {}\n");
  r = admin.request("POST", "/admin/v1/reload");
  EXPECT_EQ(r.status, 400) << r.body;
  auto err = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(err.is_discarded());
  EXPECT_EQ(err["error"]["code"], "invalid-config");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("flowControll"), std::string::npos)
      << r.body;
  EXPECT_TRUE(has_band(admin, 10));
  EXPECT_EQ(live_endpoints(admin), 2);
  // A plugin that cannot be built is invalid too.
  {
    std::string bad = valid_text;
    bad.replace(bad.find("maxConcurrency: 4"), 17, "maxConcurrency: -4");
    rewrite(cfg, bad);
  }
  r = admin.request("POST", "/admin/v1/reload");
  EXPECT_EQ(r.status, 400) << r.body;
  // SIGHUP with the invalid file: logged, still running, nothing changed.
  ASSERT_EQ(::kill(sluice->pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] {
    const auto& log = sluice->stderr_now();
    return log.find("SIGHUP") != std::string::npos &&
           log.find("not applied; the running config stays", log.find("SIGHUP")) !=
               std::string::npos;
  }));
  EXPECT_TRUE(sluice->running());
  EXPECT_TRUE(has_band(admin, 10));

  // SIGHUP with a valid file: the second endpoint and band 10 go.
  rewrite(cfg, reload_config({mock_a->address()}, "  - {name: premium, priority: 10}\n"));
  ASSERT_EQ(::kill(sluice->pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return live_endpoints(admin) == 1 && !has_band(admin, 10); }));
  const int before = load.total();
  ASSERT_TRUE(eventually([&] { return load.total() >= before + 50; }, 10000ms));
  load.stop();
  auto statuses = load.statuses();
  EXPECT_EQ(statuses.size(), 1u) << "statuses seen: " << json(statuses).dump()
                                 << " first errors: " << json(load.errors()).dump();
  EXPECT_GT(statuses[200], 100);
  EXPECT_EQ(sluice->stop(), 0) << sluice->stderr_text();
}

// Drain: new requests are turned away (503 draining, not ready), every
// queued and in-flight one is answered by the model, then "drained";
// DELETE admits again.
TEST(Operator, DrainFinishesEverythingQueuedAndInFlight) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(fc_config(mock->address(), 2, "round-robin-fairness-policy"));
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  ASSERT_TRUE(eventually([&] { return admin.request("GET", "/readyz").status == 200; }));
  EXPECT_EQ(json::parse(admin.request("GET", "/admin/v1/drain").body)["state"], "serving");
  constexpr int kRequests = 10;
  std::vector<int> statuses(kRequests, 0);
  std::vector<std::thread> clients;
  // Each request takes ~1 s (100 tokens at 10 ms): "all in" holds from the
  // last arrival until the first completion, long enough to be seen and
  // drained however slowly the client threads start.
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      statuses[static_cast<std::size_t>(i)] =
          c.post_json("/v1/completions", completion_body(100), flow("t" + std::to_string(i % 3)))
              .status;
    });
  // All in: two in flight, the rest queued.
  ASSERT_TRUE(eventually(
      [&] {
        auto d = json::parse(admin.request("GET", "/admin/v1/drain").body);
        return d["queued"].get<int>() + d["inFlight"].get<int>() == kRequests;
      },
      10000ms));
  auto r = admin.request("POST", "/admin/v1/drain");
  ASSERT_EQ(r.status, 202) << r.body;
  auto d = json::parse(r.body);
  EXPECT_EQ(d["state"], "draining");
  EXPECT_EQ(d["queued"].get<int>() + d["inFlight"].get<int>(), kRequests);
  // Turned away while draining, with a reason, and not ready.
  HttpClient late(kHost, sluice->port());
  auto refused = late.post_json("/v1/completions", completion_body(1), flow("late"));
  expect_outcome(refused, 503, "draining", true);
  EXPECT_EQ(admin.request("GET", "/readyz").status, 503);
  ASSERT_TRUE(eventually(
      [&] {
        return json::parse(admin.request("GET", "/admin/v1/drain").body)["state"] == "drained";
      },
      20000ms));
  for (auto& t : clients) t.join();
  for (int s : statuses) EXPECT_EQ(s, 200);
  // Accounted for: the model served exactly the ones admitted.
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), kRequests);
  r = admin.request("POST", "/admin/v1/drain");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["state"], "drained");
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/drain").status, 200);
  EXPECT_EQ(json::parse(admin.request("GET", "/admin/v1/drain").body)["state"], "serving");
  HttpClient again(kHost, sluice->port());
  EXPECT_EQ(again.post_json("/v1/completions", completion_body(1), flow("late")).status, 200);
  EXPECT_EQ(admin.request("PUT", "/admin/v1/drain").status, 405);
  EXPECT_EQ(sluice->stop(), 0);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One JSON line per request, whichever way it ended, with its fields.
TEST(Operator, AccessLogHasOneJsonLinePerRequest) {
  auto mock = start_mock();
  TempFile cfg(fc_config(mock->address(), 4, "round-robin-fairness-policy"));
  TempFile log("", "access.log");
  auto sluice = start_sluice(cfg, {"--access-log", log.path()});
  HttpClient c(kHost, sluice->port());
  Headers h = flow("tenant-a", "interactive");
  h.emplace_back("x-request-id", "req-42:a/b");
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(3), h).status, 200);
  EXPECT_EQ(
      c.post_json("/v1/completions", completion_body(3), {{"x-gateway-inference-ttl-ms", "x"}})
          .status,
      400);
  EXPECT_EQ(c.request("GET", "/nope").status, 404);
  ASSERT_TRUE(eventually([&] { return read_lines(log.path()).size() >= 3; }));
  auto lines = read_lines(log.path());
  ASSERT_EQ(lines.size(), 3u);
  auto served = json::parse(lines[0], nullptr, false);
  ASSERT_FALSE(served.is_discarded()) << lines[0];
  EXPECT_EQ(served["request_id"], "req-42:a/b");
  EXPECT_EQ(served["flow"], "tenant-a");
  EXPECT_EQ(served["priority"], 100);
  EXPECT_EQ(served["objective"], "interactive");
  EXPECT_EQ(served["model"], "mock-model");
  EXPECT_EQ(served["outcome"], "served");
  EXPECT_EQ(served["endpoint"], mock->address());
  EXPECT_EQ(served["status"], 200);
  EXPECT_EQ(served["output_tokens"], 3);
  EXPECT_GT(served["input_tokens"].get<int>(), 0);
  EXPECT_GE(served["queue_ms"].get<double>(), 0);
  EXPECT_GT(served["upstream_ms"].get<double>(), 0);
  EXPECT_GE(served["total_ms"].get<double>(), served["upstream_ms"].get<double>());
  auto refused = json::parse(lines[1]);
  EXPECT_EQ(refused["outcome"], "invalid-ttl");
  EXPECT_EQ(refused["status"], 400);
  EXPECT_EQ(refused["endpoint"], "");
  auto missing = json::parse(lines[2]);
  EXPECT_EQ(missing["outcome"], "not-found");
  EXPECT_EQ(missing["path"], "/nope");
  EXPECT_EQ(sluice->stop(), 0);

  // Text format; and nothing per request on stderr at info level without it.
  TempFile text_log("", "access.txt");
  auto plain =
      start_sluice(cfg, {"--access-log", text_log.path(), "--access-log-format", "text"}, true);
  HttpClient c2(kHost, plain->port());
  EXPECT_EQ(c2.post_json("/v1/completions", completion_body(2), flow("tenant-b")).status, 200);
  ASSERT_TRUE(eventually([&] { return read_lines(text_log.path()).size() >= 1; }));
  const auto t = read_lines(text_log.path())[0];
  EXPECT_NE(t.find(" flow=tenant-b "), std::string::npos) << t;
  EXPECT_NE(t.find(" outcome=served "), std::string::npos) << t;
  EXPECT_NE(t.find(" status=200 "), std::string::npos) << t;
  EXPECT_EQ(plain->stop(), 0);
  const auto& err = plain->stderr_text();
  EXPECT_EQ(err.find("tenant-b"), std::string::npos) << err;
}

// sluice-ctl against a loaded sluice: every command, tables and --json,
// and clear errors (validation, 401, unreachable, usage).
TEST(Operator, SluiceCtlDrivesTheAdminPlane) {
  auto mock = start_mock({"--decode-ms-per-token", "2"});
  TempFile cfg(fc_config(mock->address(), 2, "round-robin-fairness-policy"));
  TempFile token("s3cret\n", "token");
  auto sluice = start_sluice(cfg, {"--admin-token-file", token.path()});
  const std::string admin = "--admin 127.0.0.1:" + std::to_string(sluice->admin_port());
  const std::string auth = admin + " --token-file " + token.path();
  Load load(sluice->port(), 3, {flow("tenant-a"), flow("tenant-b", "best-effort")});
  ASSERT_TRUE(eventually([&] { return load.total() >= 30; }, 10000ms));

  // With a token, reads need it too (they name tenants and traffic).
  auto r = ctl(admin + " flows");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("401 unauthorized"), std::string::npos) << r.err;
  r = ctl(auth + " flows");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ID ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("tenant-a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tenant-b"), std::string::npos) << r.out;
  r = ctl(auth + " --json flows");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto flows = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(flows.is_array()) << r.out;

  // Changes need the token: 401, said clearly, nothing changed.
  r = ctl(admin + " flow set tenant-a --weight 3 --priority 10");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("401 unauthorized"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--token-file"), std::string::npos) << r.err;
  r = ctl(auth + " flow set tenant-a --weight 3 --priority 10");
  EXPECT_EQ(r.rc, 0) << r.err;
  r = ctl(auth + " --json flow tenant-a");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto one = json::parse(r.out);
  EXPECT_EQ(one["override"]["weight"], 3.0);
  EXPECT_EQ(one["override"]["priority"], 10);
  // The environment's token works too.
  r = ctl(admin + " flow reset tenant-a", "SLUICE_ADMIN_TOKEN=s3cret");
  EXPECT_EQ(r.rc, 0) << r.err;
  // Validation: the server's message, exit 1.
  r = ctl(auth + " flow set tenant-a --weight 0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("400 invalid-field: weight must be a number at least 0.000001"),
            std::string::npos)
      << r.err;
  r = ctl(auth + " flow set nobody --weight 2");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("404 unknown-flow"), std::string::npos) << r.err;
  r = ctl(auth + " band set 10 --fairness fastest-please");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("fairnessPolicy must be"), std::string::npos) << r.err;

  r = ctl(auth + " band set 10 --max-requests 40 --share 0.1");
  EXPECT_EQ(r.rc, 0) << r.err;
  r = ctl(auth + " bands");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("configured"), std::string::npos) << r.out;
  r = ctl(auth + " band delete 10");
  EXPECT_EQ(r.rc, 0) << r.err;
  r = ctl(auth + " endpoints");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(mock->address()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("healthy"), std::string::npos) << r.out;
  r = ctl(auth + " reload");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("reloaded; nothing changed"), std::string::npos) << r.out;
  r = ctl(auth + " metrics");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("inference_objective_request_total"), std::string::npos);

  // Usage and unreachable.
  r = ctl(admin + " flow set tenant-a --weight");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--weight needs a value"), std::string::npos) << r.err;
  r = ctl(admin + " frobnicate");
  EXPECT_EQ(r.rc, 2);
  ClosedPort unreachable;
  r = ctl("--admin " + unreachable.address() + " flows");
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("cannot reach the admin plane"), std::string::npos) << r.err;

  // Drain under load: waits until drained; the load sees 503 draining after.
  r = ctl(auth + " drain --wait --timeout 20");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("drained: 0 queued, 0 in flight"), std::string::npos) << r.out;
  load.stop();
  for (const auto& [status, n] : load.statuses())
    EXPECT_TRUE(status == 200 || status == 503) << status << " " << json(load.errors()).dump();
  r = ctl(auth + " drain cancel");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("serving"), std::string::npos) << r.out;
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
