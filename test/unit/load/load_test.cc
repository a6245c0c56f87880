// sluice-load's pieces: distributions, statistics against hand-computed
// values, the scenario parser's errors and the TLS client's setup.
#include <gtest/gtest.h>

#include <cmath>

#include "tools/load/distributions.h"
#include "tools/load/driver.h"
#include "tools/load/report.h"
#include "tools/load/scenario.h"
#include "tools/load/stats.h"
#include "tools/load/tls_client.h"

namespace sluice::load {
namespace {

TEST(Distributions, MeansAndBoundsOverManySamples) {
  Rng rng(42);
  const Distribution uniform{Distribution::Kind::kUniform, 10, 30, 10, 30};
  const Distribution expo{Distribution::Kind::kExponential, 5};
  const Distribution normal{Distribution::Kind::kNormal, 100, 10, 0, 1e18};
  const Distribution lognormal{Distribution::Kind::kLogNormal, 50, 0.5};
  double su = 0, se = 0, sn = 0, sl = 0, lo = 1e9, hi = -1;
  constexpr int kN = 200000;
  for (int i = 0; i < kN; ++i) {
    const double u = uniform.sample(rng);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    su += u;
    se += expo.sample(rng);
    sn += normal.sample(rng);
    sl += lognormal.sample(rng);
  }
  // Standard errors are well below these tolerances at 200k samples.
  EXPECT_NEAR(su / kN, 20, 0.1);
  EXPECT_NEAR(se / kN, 5, 0.1);
  EXPECT_NEAR(sn / kN, 100, 0.2);
  EXPECT_NEAR(sl / kN, lognormal.mean(), 0.5);
  EXPECT_GE(lo, 10);
  EXPECT_LE(hi, 30);
  const Distribution clamped{Distribution::Kind::kNormal, 0, 100, 0, 5};
  for (int i = 0; i < 1000; ++i) {
    const double v = clamped.sample(rng);
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 5);
  }
  EXPECT_EQ((Distribution{Distribution::Kind::kConstant, 0.2}.sample_count(rng)),
            1u);  // at least one token
}

TEST(Stats, PercentilesAreNearestRank) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(percentile(v, 50), 5);
  EXPECT_EQ(percentile(v, 90), 9);
  EXPECT_EQ(percentile(v, 99), 10);
  EXPECT_EQ(percentile(v, 0), 1);
  EXPECT_EQ(percentile(v, 100), 10);
  EXPECT_EQ(percentile({7}, 50), 7);
  EXPECT_EQ(percentile({}, 50), 0);
  const std::vector<double> w = {10, 20, 30};  // rank ceil(0.5*3) = 2
  EXPECT_EQ(percentile(w, 50), 20);
}

TEST(Stats, JainIndexMatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(jain_index({1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({1, 0, 0, 0}), 0.25);
  // (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100 / 120
  EXPECT_DOUBLE_EQ(jain_index({1, 2, 3, 4}), 100.0 / 120.0);
  // (3+1)^2 / (2 * 10) = 0.8
  EXPECT_DOUBLE_EQ(jain_index({3, 1}), 0.8);
  EXPECT_DOUBLE_EQ(jain_index({}), 1.0);
}

TEST(Stats, ReducesRecordsPerFlow) {
  // Two flows over a 10 s window; flow 0 always has one outstanding, flow 1
  // only briefly.
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 10; ++i) {
    RequestRecord r;
    r.flow = 0;
    r.sent = i;
    r.first_byte = i + 0.1;
    r.first_token = i + 0.2;
    r.done = i + 1.0;
    r.status = 200;
    r.endpoint = "a:1";
    r.input_tokens = 10;
    r.output_tokens = 11;
    recs.push_back(r);
  }
  RequestRecord shed;
  shed.flow = 1;
  shed.sent = 2;
  shed.done = 2.01;
  shed.status = 429;
  shed.reason = "rejected-capacity";
  recs.push_back(shed);
  RequestRecord err = shed;
  err.status = 500;
  err.reason.clear();
  recs.push_back(err);
  RequestRecord lost = shed;
  lost.status = 0;
  lost.error = "read: connection reset";
  recs.push_back(lost);
  auto st = compute_stats(recs, {"a", "b"}, {1, 1}, {"g", "g"}, {{{0, 10}}, {{0, 10}}}, {0, 2}, 0,
                          10, 10);
  EXPECT_TRUE(st.groups.empty());  // one backlogged member only
  const auto& a = st.flows[0];
  EXPECT_EQ(a.sent, 10u);
  EXPECT_EQ(a.ok, 10u);
  EXPECT_DOUBLE_EQ(a.offered_rate, 1.0);
  EXPECT_DOUBLE_EQ(a.completed_rate, 0.9);  // the last completes at 10.0, outside [0, 10)
  EXPECT_DOUBLE_EQ(a.e2e.p50, 1.0);
  EXPECT_NEAR(a.ttft.p99, 0.2, 1e-9);
  EXPECT_NEAR(a.tpot.p50, 0.08, 1e-9);  // (1.0 - 0.2) / (11 - 1)
  EXPECT_TRUE(a.backlogged);
  EXPECT_EQ(a.endpoints.at("a:1"), 10u);
  const auto& b = st.flows[1];
  EXPECT_EQ(b.sent, 3u);
  EXPECT_EQ(b.shed, 1u);
  EXPECT_EQ(b.errors, 1u);
  EXPECT_EQ(b.lost, 1u);
  EXPECT_EQ(b.not_sent, 2u);
  EXPECT_EQ(b.outcomes.at("429 rejected-capacity"), 1u);
  EXPECT_EQ(b.outcomes.at("lost: read: connection reset"), 1u);
  EXPECT_FALSE(b.backlogged);
  EXPECT_EQ(st.backlogged_flows, 1u);
  EXPECT_DOUBLE_EQ(a.token_share, 1.0);
  EXPECT_EQ(st.total_sent, 13u);
  EXPECT_EQ(st.total_lost, 1u);
}

// Inter-token gaps: only events received inside the window count (gaps and
// events/s), whatever the request's outcome; gaps of 0 (events read in one
// go) are kept.
// The reason and endpoint strings are whatever the server sent in its
// headers. Bytes that are not UTF-8 must not cost the run its reports
// (nlohmann's strict dump throws): they come out as U+FFFD, the rest intact.
TEST(Report, HeaderBytesThatAreNotUtf8AreReplacedNotThrown) {
  Scenario s = parse_scenario(R"(name: t
duration: 1s
flows:
  - name: a
    arrival: {type: closed, clients: 1}
)",
                              "t.yaml");
  RequestRecord r;
  r.flow = 0;
  r.sent = 0.1;
  r.first_byte = 0.2;
  r.done = 0.3;
  r.status = 429;
  r.reason = "rejected-\xff\xfe";
  r.endpoint = "10.0.0.1:\xc3";
  const std::string line = request_line(s, r);
  auto j = nlohmann::json::parse(line, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << line;
  EXPECT_EQ(j["reason"], "rejected-\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(j["endpoint"], "10.0.0.1:\xef\xbf\xbd");
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["flow"], "a");

  const RunStats st = compute_stats({r}, {"a"}, {1.0}, {""}, {{{0.0, 1.0}}}, {0}, 0, 1, 1);
  const std::string text = report_text(json_report(s, st, "http://127.0.0.1:1"), 2);
  auto report = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["flows"][0]["outcomes"]["429 rejected-\xef\xbf\xbd\xef\xbf\xbd"], 1) << text;
}

TEST(Stats, InterTokenGapsOfEventsInsideTheWindow) {
  std::vector<RequestRecord> recs;
  RequestRecord r;
  r.sent = 0.5;
  r.first_token = 0.9;                            // outside [1, 3)
  r.token_gaps = {0.2f, 0.3f, 0.0f, 0.5f, 1.5f};  // events at 1.1, 1.4, 1.4, 1.9, 3.4
  r.done = 3.5;
  r.status = 200;
  recs.push_back(r);
  RequestRecord cut = r;  // cut mid-stream: its events still count
  cut.first_token = 1.0;  // events at 1.0, 2.0
  cut.token_gaps = {1.0f};
  cut.status = 0;
  cut.error = "cut mid-response";
  recs.push_back(cut);
  auto st = compute_stats(recs, {"a"}, {1}, {""}, {{{0, 4}}}, {0}, 1, 3, 4);
  const auto& f = st.flows[0];
  EXPECT_EQ(f.itl.count, 5u);  // 0.2, 0.3, 0.0, 0.5 and cut's 1.0
  EXPECT_NEAR(f.itl.max, 1.0, 1e-6);
  EXPECT_NEAR(f.itl.sorted.front(), 0.0, 1e-9);
  EXPECT_NEAR(f.itl.p50, 0.3, 1e-6);
  EXPECT_DOUBLE_EQ(f.token_events_per_s, 6.0 / 2.0);  // 4 + cut's 2, over 2 s
}

TEST(Prompts, SharedPrefixesAreIdenticalAndLengthsHold) {
  Rng r1(1), r2(2);
  const auto a = make_prompt(r1, 100, 3, 40);
  const auto b = make_prompt(r2, 60, 3, 40);
  const auto c = make_prompt(r1, 60, 2, 40);
  auto prefix = [](const std::string& s, int words) {
    std::size_t at = 0;
    for (int i = 0; i < words; ++i) at = s.find(' ', at) + 1;
    return s.substr(0, at);
  };
  EXPECT_EQ(prefix(a, 40), prefix(b, 40));
  EXPECT_NE(prefix(a, 40), prefix(c, 40));
  EXPECT_EQ(std::count(a.begin(), a.end(), ' '), 100);
}

std::string bad(const std::string& yaml) {
  try {
    parse_scenario(yaml, "s.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, ParsesAFullFile) {
  auto s = parse_scenario(R"(
name: demo
target: http://127.0.0.1:8080
duration: 30s
warmup: 5s
maxRequests: 500
sharedPrefixes: {count: 3, tokens: 128}
flows:
  - name: interactive
    objective: interactive
    arrival: {type: poisson, rate: 4}
    promptTokens: {type: uniform, min: 50, max: 150}
    maxTokens: 32
    stream: true
  - name: batch
    fairnessId: batch-a
    weight: 2
    headers: {x-extra: "1"}
    arrival: {type: closed, clients: 8, think: 10ms}
    sharedPrefixShare: 0.5
    start: 2s
    stop: 20s
    phases:
      - {at: 5s, clients: 16}
      - {at: 10s, stop: true}
      - {at: 12s, clients: 4}
)",
                          "s.yaml");
  ASSERT_EQ(s.flows.size(), 2u);
  EXPECT_EQ(s.duration, std::chrono::seconds(30));
  EXPECT_EQ(s.flows[0].fairness_id, "interactive");
  EXPECT_EQ(s.flows[0].arrival.kind, Arrival::Kind::kPoisson);
  EXPECT_EQ(s.flows[0].prompt_tokens.kind, Distribution::Kind::kUniform);
  EXPECT_TRUE(s.flows[0].stream);
  EXPECT_EQ(s.flows[1].fairness_id, "batch-a");
  EXPECT_EQ(s.flows[1].arrival.clients, 8);
  EXPECT_EQ(s.flows[1].phases.size(), 3u);
  EXPECT_TRUE(s.flows[1].phases[1].stop);
  EXPECT_EQ(s.flows[1].headers[0].first, "x-extra");
}

TEST(Scenario, BadFilesNameTheField) {
  const std::string flow = "flows:\n  - name: a\n    arrival: {type: poisson, rate: 1}\n";
  EXPECT_NE(bad("durtion: 5s\n" + flow).find("durtion (line 1): unknown field"), std::string::npos);
  EXPECT_NE(bad("duration: soon\n" + flow).find("duration (line 1): expected a duration"),
            std::string::npos);
  EXPECT_NE(bad("name: x\n").find("flows"), std::string::npos);
  EXPECT_NE(bad("flows:\n  - name: a\n    arrival: {type: poisson, rate: 0}\n")
                .find("flows[0].arrival.rate (line 3): must be greater than 0"),
            std::string::npos)
      << bad("flows:\n  - name: a\n    arrival: {type: poisson, rate: 0}\n");
  EXPECT_NE(
      bad("flows:\n  - name: a\n    arrival: {type: bursty}\n").find("unknown arrival 'bursty'"),
      std::string::npos);
  EXPECT_NE(
      bad("flows:\n  - name: a\n    arrival: {type: closed}\n").find("flows[0].arrival.clients"),
      std::string::npos);
  EXPECT_NE(bad(flow + "    maxTokens: {type: zipf}\n").find("unknown distribution 'zipf'"),
            std::string::npos);
  EXPECT_NE(
      bad(flow + "    promptTokens: {type: uniform, min: 9, max: 3}\n").find("promptTokens.max"),
      std::string::npos);
  EXPECT_NE(bad(flow + "    sharedPrefixShare: 2\n").find("must be from 0 to 1"),
            std::string::npos);
  EXPECT_NE(
      bad(flow + "    phases:\n      - {at: 5s, clients: 3}\n").find("changes rate, not clients"),
      std::string::npos);
  EXPECT_NE(bad(flow + "    phases:\n      - {at: 5s, rate: 3}\n      - {at: 2s, rate: 1}\n")
                .find("in time order"),
            std::string::npos);
  EXPECT_NE(bad(flow + "  - name: a\n    arrival: {type: poisson, rate: 1}\n")
                .find("duplicate flow name"),
            std::string::npos);
  EXPECT_NE(bad("target: 127.0.0.1:80\n" + flow).find("must start with http://"),
            std::string::npos);
  EXPECT_NE(bad("flows: [\n").find("s.yaml: line"), std::string::npos);
  EXPECT_NE(bad(flow + "    stream: maybe\n").find("expected true or false"), std::string::npos);
}

}  // namespace
}  // namespace sluice::load

namespace sluice::load {
namespace {

TEST(Scenario, TheShippedScenariosLoad) {
  for (const char* name :
       {"demo", "demo-solo", "vtc-overload", "vtc-weighted", "vtc-on-off", "shared-prefix", "burst",
        "priority-flood", "priority-flood-solo", "priority-flood-batch",
        "priority-flood-tiny-batch-prompts", "soak", "soak-aborts"}) {
    const std::string path = std::string(SLUICE_SCENARIOS_DIR) + "/" + name + ".yaml";
    EXPECT_NO_THROW(load_scenario_file(path)) << path;
  }
}

// An https target's CA bundle that cannot be read fails the run, named.
TEST(TlsClient, AMissingCaFileIsNamed) {
  try {
    make_tls_client_context("/nonexistent/ca.pem");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ca.pem"), std::string::npos) << e.what();
  }
}

// An address is checked against the certificate's IP addresses (no SNI),
// a name against its names and sent as SNI.
TEST(TlsClient, SessionsCheckTheAddressOrTheName) {
  auto ctx = make_tls_client_context("");
  for (const std::string host : {"127.0.0.1", "::1", "localhost"}) {
    SSL* ssl = SSL_new(ctx->native_handle());
    ASSERT_NE(ssl, nullptr);
    EXPECT_TRUE(prepare_tls_session(ssl, host)) << host;
    const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (host == "localhost")
      EXPECT_STREQ(sni, "localhost");
    else
      EXPECT_EQ(sni, nullptr) << host;
    SSL_free(ssl);
  }
}

}  // namespace
}  // namespace sluice::load
