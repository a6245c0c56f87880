// sluice-load against a real sluice: the JSON report's counts reconcile with
// sluice's own /metrics — every request sent is accounted for exactly once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

double series(const std::string& metrics, const std::string& name) {
  auto at = metrics.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::stod(metrics.substr(at + name.size() + 2));
}

TEST(Load, ReportReconcilesWithSluiceMetrics) {
  auto mock = start_mock({"--decode-ms-per-token", "5"});
  // One at a time and a queue of 3: some requests are shed (429).
  TempFile cfg(fc_config(mock->address(), 1, "round-robin-fairness-policy", "  maxRequests: 3\n"));
  auto sluice = start_sluice(cfg);
  TempFile scenario(R"(name: tiny
duration: 2s
maxRequests: 400
drain: 10s
flows:
  - name: open
    arrival: {type: poisson, rate: 40}
    maxTokens: 4
    stream: true
  - name: closed
    fairnessId: closed-tenant
    arrival: {type: closed, clients: 3}
    maxTokens: {type: uniform, min: 2, max: 6}
)",
                    "scenario.yaml");
  TempFile out("", "report.json");
  TempFile html("", "report.html");
  const std::string cmd = std::string(SLUICE_LOAD_BIN) + " --scenario " + scenario.path() +
                          " --target http://" + sluice->address() + " --json " + out.path() +
                          " --html " + html.path() + " --quiet";
  ASSERT_EQ(run_shell(cmd), 0);
  std::ifstream in(out.path());
  json report = json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  HttpClient admin(kHost, sluice->admin_port());
  const std::string metrics = admin.request("GET", "/metrics").body;

  const auto& totals = report["totals"];
  const int sent = totals["sent"], ok = totals["ok"], shed = totals["shed"];
  EXPECT_GT(ok, 10);
  EXPECT_GT(shed, 0);  // the queue limit was hit
  EXPECT_EQ(totals["lost"], 0);
  EXPECT_EQ(totals["errors"], 0);
  EXPECT_EQ(sent, ok + shed);
  // sluice saw exactly these: by outcome.
  EXPECT_EQ(series(metrics, "sluice_requests_total{outcome=\"served\"}"), ok);
  std::map<std::string, int> reasons;
  int flow_sent = 0;
  for (const auto& f : report["flows"]) {
    flow_sent += f["sent"].get<int>();
    for (auto it = f["outcomes"].begin(); it != f["outcomes"].end(); ++it) {
      const std::string k = it.key();
      if (k.rfind("429 ", 0) == 0 || k.rfind("503 ", 0) == 0)
        reasons[k.substr(4)] += it.value().get<int>();
    }
  }
  EXPECT_EQ(flow_sent, sent);
  for (const auto& [reason, n] : reasons)
    EXPECT_EQ(series(metrics, "sluice_requests_total{outcome=\"" + reason + "\"}"), n) << reason;
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), ok);
  // Streams were timed; the served-by header was read.
  // (Round-robin between the two flows of one band: both are served.)
  const auto& open = report["flows"][0];
  EXPECT_GT(open["ok"].get<int>(), 0);
  EXPECT_EQ(open["ttftSeconds"]["count"], open["ok"]);
  ASSERT_EQ(open["endpoints"].size(), 1u);
  EXPECT_EQ(open["endpoints"][mock->address()], open["ok"]);
  std::ifstream h(html.path());
  const std::string page((std::istreambuf_iterator<char>(h)), {});
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_EQ(page.find("http://www.w3.org/2000/svg' width"),
            page.find("http://www.w3.org/2000/svg"));  // inline only
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);

  // A bad scenario: exit 2, the field named.
  TempFile broken("flows:\n  - name: a\n    arrival: {type: poisson, rate: -1}\n", "bad.yaml");
  EXPECT_EQ(run_shell(std::string(SLUICE_LOAD_BIN) + " --scenario " + broken.path() +
                      " --target http://" + sluice->address() + " 2>/dev/null"),
            2);
  EXPECT_EQ(sluice->stop(), 0);
}

// Any OpenAI-compatible server: the mock directly, chat completions,
// streamed, closed loop; every request served and timed.
TEST(Load, DrivesAnyOpenAICompatibleServer) {
  auto mock = start_mock({"--decode-ms-per-token", "2"});
  TempFile scenario(R"(name: chat
path: /v1/chat/completions
duration: 1s
maxRequests: 60
flows:
  - name: chat
    arrival: {type: closed, clients: 2}
    promptTokens: {type: normal, mean: 40, stddev: 10, min: 5}
    maxTokens: 5
    stream: true
)",
                    "chat.yaml");
  TempFile out("", "chat.json");
  TempFile requests("", "chat.jsonl");
  ASSERT_EQ(run_shell(std::string(SLUICE_LOAD_BIN) + " --scenario " + scenario.path() +
                      " --target http://" + mock->address() + " --json " + out.path() +
                      " --requests " + requests.path() + " --quiet"),
            0);
  std::ifstream in(out.path());
  json report = json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  const auto& f = report["flows"][0];
  EXPECT_GT(f["sent"].get<int>(), 5);
  EXPECT_LE(f["sent"].get<int>(), 60);  // the request cap
  EXPECT_EQ(f["ok"], f["sent"]);
  EXPECT_EQ(f["ttftSeconds"]["count"], f["latencySeconds"]["count"]);
  EXPECT_GT(f["outputTokensPerSecond"].get<double>(), 0);
  EXPECT_GT(f["tpotSeconds"]["p50"].get<double>(), 0);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), f["sent"].get<int>());

  // --requests: one line per request sent, each timed in order and served.
  std::ifstream lines(requests.path());
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    json r = json::parse(line, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << line;
    EXPECT_EQ(r["flow"], "chat");
    EXPECT_EQ(r["status"], 200);
    EXPECT_LE(r["sent"].get<double>(), r["firstByte"].get<double>());
    EXPECT_LE(r["firstByte"].get<double>(), r["firstToken"].get<double>());
    EXPECT_LE(r["firstToken"].get<double>(), r["done"].get<double>());
    EXPECT_EQ(r["outputTokens"], 5);
  }
  EXPECT_EQ(n, f["sent"].get<int>());
}

}  // namespace
}  // namespace sluice::test
