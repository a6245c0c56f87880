// Quotas end to end (issue 41): a tenant's and a key's limits reserved
// before a request goes, settled to what it used, refused with OpenAI's
// 429s and headers. Each refusal checks the status, the code and reason,
// that the refused request never reached the engine, and that other
// tenants and keys lost nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "auth/api_keys.h"
#include "flow_control_harness.h"
#include "key_harness.h"
#include "support/fake_upstream.h"
#include "support/redis_server.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

class QuotaTest : public ::testing::Test {
 protected:
  void start(const std::string& tenants, const std::vector<auth::KeyRecord>& records,
             std::vector<std::string> mock_args = {}) {
    keys_ = std::make_unique<TempFile>(auth::render_key_file(records), "keys.yaml");
    mock_ = start_mock(std::move(mock_args));
    log_ = std::make_unique<TempFile>("", "access.log");
    std::string c = make_config({mock_->address()}, "  accessLog: " + log_->path() + "\n") +
                    "auth:\n  apiKeys: {file: " + keys_->path() + ", pollInterval: 50ms}\n" +
                    tenants;
    cfg_ = std::make_unique<TempFile>(c);
    sluice_ = start_sluice(*cfg_);
    ASSERT_TRUE(sluice_);
  }
  Response post(const Headers& h, const std::string& body) {
    HttpClient c(kHost, sluice_->port());
    return c.post_json("/v1/completions", body, h);
  }
  // Inference requests the engine saw.
  std::size_t engine_requests() { return engine_requests(*sluice_); }
  static std::size_t engine_requests(const Process& sluice) {
    HttpClient admin(kHost, sluice.admin_port());
    auto m = admin.request("GET", "/metrics");
    std::size_t n = 0;
    for (std::size_t p = m.body.find("sluice_tenant_requests_total{"); p != std::string::npos;
         p = m.body.find("sluice_tenant_requests_total{", p + 1)) {
      const auto eol = m.body.find('\n', p);
      const std::string line = m.body.substr(p, eol - p);
      if (line.find("outcome=\"served\"") != std::string::npos)
        n += std::stoul(line.substr(line.rfind(' ') + 1));
    }
    return n;
  }
  void expect_quota_refused(const Response& r, const std::string& code, const std::string& reason) {
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), reason);
    auto body = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << r.body;
    EXPECT_EQ(body["error"]["code"], code) << r.body;
  }

  // The one limit of `tenant` as GET /admin/v1/quotas shows it, once
  // nothing is held (every request of the tenant has settled).
  json settled_row(const std::string& tenant) {
    HttpClient admin(kHost, sluice_->admin_port());
    json row;
    EXPECT_TRUE(eventually([&] {
      auto view = admin.request("GET", "/admin/v1/quotas?tenant=" + tenant);
      if (view.status != 200) return false;
      row = json::parse(view.body).at(0);
      return row["reserved"] == 0;
    }));
    return row;
  }

  std::unique_ptr<Process> mock_;
  // The access log's lines as JSON, once `n` are there.
  std::vector<json> log_lines(std::size_t n) {
    std::vector<json> out;
    eventually([&] {
      out.clear();
      std::ifstream in(log_->path());
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(json::parse(line));
      return out.size() >= n;
    });
    return out;
  }

  std::unique_ptr<TempFile> keys_, cfg_, log_;
  std::unique_ptr<Process> sluice_;
};

// acme with 100k tokens a minute: more than any of these tests spends.
constexpr const char* kAcmeTpm100k = R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 100k, window: 1m}
)";

std::string body_with(const std::string& limits) {
  return R"({"model":"mock-model","prompt":"Say something about fairness.",)" + limits + "}";
}

TEST_F(QuotaTest, ATokenLimitHoldsAndRefusesWithOpenAIsHeaders) {
  Key acme = make_key("acme", "key_acme");
  Key beta = make_key("beta", "key_beta");
  start(R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 100, window: 1m}
)",
        {acme.record, beta.record});
  // Larger than the limit: it never fits, so it is not to be retried.
  auto big = post(bearer(acme.secret), body_with(R"("max_tokens":150)"));
  expect_quota_refused(big, "insufficient_quota", "quota-exhausted");
  EXPECT_EQ(big.header("x-should-retry"), "false");
  // Requests of 30 output tokens until one is refused; what was served
  // never exceeds the limit (each reserved its worst case first).
  std::uint64_t used = 0;
  int served = 0;
  Response refused;
  for (int i = 0; i < 10 && refused.status == 0; ++i) {
    auto r = post(bearer(acme.secret), body_with(R"("max_tokens":30)"));
    if (r.status == 200) {
      ++served;
      used += json::parse(r.body)["usage"]["total_tokens"].get<std::uint64_t>();
      EXPECT_EQ(r.header("x-ratelimit-limit-tokens"), "100");
      EXPECT_FALSE(r.header("x-ratelimit-remaining-tokens").empty());
      EXPECT_FALSE(r.header("x-ratelimit-reset-tokens").empty());
    } else {
      refused = r;
    }
  }
  EXPECT_GE(served, 2);
  EXPECT_LE(used, 100u);
  expect_quota_refused(refused, "rate_limit_exceeded", "quota-exceeded");
  EXPECT_GE(std::stoi(refused.header("retry-after")), 1);
  EXPECT_GE(std::stol(refused.header("retry-after-ms")), 1);
  EXPECT_EQ(refused.header("x-should-retry"), "");
  EXPECT_EQ(refused.header("x-ratelimit-limit-tokens"), "100");  // on the 429 too
  EXPECT_EQ(refused.header("x-ratelimit-remaining-tokens"), std::to_string(100 - used));
  // The refused ones never reached the engine; another tenant is served.
  EXPECT_TRUE(eventually([&] { return engine_requests() == static_cast<std::size_t>(served); }));
  EXPECT_EQ(post(bearer(beta.secret), body_with(R"("max_tokens":30)")).status, 200);
  EXPECT_TRUE(
      eventually([&] { return engine_requests() == static_cast<std::size_t>(served) + 1; }));
  // The operator's view: the books add up to what the answers reported.
  HttpClient admin(kHost, sluice_->admin_port());
  auto view = admin.request("GET", "/admin/v1/quotas?tenant=acme");
  ASSERT_EQ(view.status, 200) << view.body;
  const json rows = json::parse(view.body);
  ASSERT_EQ(rows.size(), 1u) << view.body;
  EXPECT_EQ(rows[0]["tenant"], "acme");
  EXPECT_EQ(rows[0]["name"], "tpm");
  EXPECT_EQ(rows[0]["used"], used);
  EXPECT_EQ(rows[0]["reserved"], 0);
  EXPECT_EQ(rows[0]["remaining"], 100 - used);
  EXPECT_EQ(rows[0]["refused"], 2);
  auto m = admin.request("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(sluice_quota_refused_total{tenant="acme",quota="tpm"} 2)"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find(R"(sluice_quota_used{tenant="acme",quota="tpm"} )" + std::to_string(used)),
            std::string::npos);
  // A reset makes room at once; an unknown tenant's is a typed 404.
  EXPECT_EQ(admin.request("POST", "/admin/v1/quotas/acme/reset").status, 200);
  EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":30)")).status, 200);
  EXPECT_EQ(admin.request("POST", "/admin/v1/quotas/nobody/reset").status, 404);
  EXPECT_EQ(admin.request("GET", "/admin/v1/quotas?tenant=" + std::string(300, 'x')).status, 400);
}

// LiteLLM #34223: a reservation taken from max_tokens while the engine
// honours max_completion_tokens let 738 tokens through a 60 TPM key.
TEST_F(QuotaTest, TheLargestOutputLimitIsReservedInEitherOrder) {
  Key acme = make_key("acme", "key_acme");
  start(R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 1000, window: 1m}
)",
        {acme.record});
  expect_quota_refused(
      post(bearer(acme.secret), body_with(R"("max_tokens":10,"max_completion_tokens":100000)")),
      "insufficient_quota", "quota-exhausted");
  expect_quota_refused(
      post(bearer(acme.secret), body_with(R"("max_completion_tokens":100000,"max_tokens":10)")),
      "insufficient_quota", "quota-exhausted");
  EXPECT_EQ(engine_requests(), 0u);  // nothing served: nothing to wait for
  EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":10)")).status, 200);
}

// A stream with no usage event settles to the tokens counted on it; one
// the client abandons settles to what was produced before it left, not to
// the 200 tokens it reserved.
TEST_F(QuotaTest, StreamsSettleToWhatWasProducedEvenWhenCancelled) {
  Key acme = make_key("acme", "key_acme");
  start(kAcmeTpm100k, {acme.record}, {"--decode-ms-per-token", "20"});
  const Headers h = bearer(acme.secret, {{"Content-Type", "application/json"}});
  HttpClient whole(kHost, sluice_->port());
  int events = 0;
  auto a = whole.stream("/v1/completions", body_with(R"("max_tokens":20,"stream":true)"), h,
                        [&](const Response&, const SseEvent& e) {
                          if (e.data != "[DONE]") ++events;
                          return true;
                        });
  ASSERT_TRUE(a.complete) << a.error;
  const std::uint64_t after_whole = settled_row("acme")["used"];
  EXPECT_GE(after_whole, 20u);  // its input estimate and the 20 tokens streamed
  HttpClient left(kHost, sluice_->port());
  int seen = 0;
  left.stream("/v1/completions", body_with(R"("max_tokens":200,"stream":true)"), h,
              [&](const Response&, const SseEvent&) { return ++seen < 3; });
  left.close();
  const std::uint64_t after_cancel = settled_row("acme")["used"];
  const std::uint64_t input = after_whole - 20;
  EXPECT_GE(after_cancel - after_whole, input + 3);   // what it produced was charged
  EXPECT_LE(after_cancel - after_whole, input + 60);  // not its 200 reserved
}

// quota.failMode reaches the fleet's leases: with Redis gone for a lease
// and failMode closed, a request under a limit is refused 503
// quota_unavailable (the default, local, would admit it on one replica),
// and never reaches the engine.
TEST_F(QuotaTest, RedisGoneWithFailModeClosedRefusesUnderALimit) {
  SLUICE_REQUIRE(redis_server_bin(), "redis-server", kRedisPackage);
  TempDir dir;
  auto redis = std::make_unique<RedisServer>(dir.path);
  ASSERT_TRUE(redis->start());
  Key acme = make_key("acme", "key_acme");
  start("redis:\n  unixSocket: " + redis->socket() +
            "\n  replicaId: r1\n  syncInterval: 10ms\n  lease: 500ms\n  timeout: 50ms\n"
            "quota:\n  failMode: closed\n" +
            kAcmeTpm100k,
        {acme.record});
  ASSERT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":5)")).status, 200);
  redis->kill();
  Response r;
  EXPECT_TRUE(eventually([&] {
    r = post(bearer(acme.secret), body_with(R"("max_tokens":5)"));
    return r.status == 503;
  })) << r.status
      << " " << r.body;
  EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), "quota-unavailable");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "quota_unavailable") << r.body;
  const std::size_t served = engine_requests();
  EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":5)")).status, 503);
  EXPECT_EQ(engine_requests(), served) << "a refused request reached the engine";
  HttpClient admin(kHost, sluice_->admin_port());
  EXPECT_NE(admin.request("GET", "/metrics").body.find("sluice_quota_fleet_degraded 1"),
            std::string::npos);
}

// Limits changed by a reload: an amount changed keeps the spend of a limit
// of the same name and period, a new limit counts from the reload, a
// limit removed is forgotten, and a tenant whose quotas go is no longer
// limited; in-flight reservations are not lost meanwhile.
TEST_F(QuotaTest, ALoadOfChangedLimitsKeepsTheSpendByName) {
  Key acme = make_key("acme", "key_acme");
  const std::string limits100 = R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 100, window: 1m}
      - {name: old, requests: 100, window: 1m}
)";
  start(limits100, {acme.record});
  auto r = post(bearer(acme.secret), body_with(R"("max_tokens":30)"));
  ASSERT_EQ(r.status, 200);
  const std::uint64_t used = json::parse(r.body)["usage"]["total_tokens"];
  HttpClient admin(kHost, sluice_->admin_port());
  auto config_with = [&](const std::string& tenants) {
    return make_config({mock_->address()}, "  accessLog: " + log_->path() + "\n") +
           "auth:\n  apiKeys: {file: " + keys_->path() + ", pollInterval: 50ms}\n" + tenants;
  };
  ASSERT_TRUE(cfg_->replace(config_with(R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 200, window: 1m}
      - {name: rpm, requests: 1, window: 1m}
)")));
  auto reload = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(reload.status, 200) << reload.body;
  auto rows = json::parse(admin.request("GET", "/admin/v1/quotas?tenant=acme").body);
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  std::map<std::string, json> by_name;
  for (const auto& row : rows) by_name[row["name"]] = row;
  EXPECT_EQ(by_name["tpm"]["limit"], 200);
  EXPECT_EQ(by_name["tpm"]["used"], used) << "the spend of a limit kept by name";
  EXPECT_EQ(by_name["rpm"]["used"], 0) << "a new limit counts from the reload";
  EXPECT_EQ(by_name.count("old"), 0u);
  // The new limit binds: one request a minute.
  EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":5)")).status, 200);
  expect_quota_refused(post(bearer(acme.secret), body_with(R"("max_tokens":5)")),
                       "rate_limit_exceeded", "quota-exceeded");
  // No quotas at all: nothing limits the tenant, and there are no books.
  ASSERT_TRUE(cfg_->replace(config_with("tenants:\n  - id: acme\n")));
  ASSERT_EQ(admin.request("POST", "/admin/v1/reload").status, 200);
  EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":5)")).status, 200);
  auto none = admin.request("GET", "/admin/v1/quotas?tenant=acme");
  EXPECT_TRUE(none.status == 404 || json::parse(none.body).empty()) << none.body;
}

// A stream under a quota is charged the engine's own usage: sluice asks
// for it (stream_options.include_usage) for a client that did not, and
// that client never sees the usage event; one that asked sees it.
TEST_F(QuotaTest, AStreamIsChargedTheEnginesUsageAndTheClientSeesOnlyWhatItAskedFor) {
  Key acme = make_key("acme", "key_acme");
  start(kAcmeTpm100k, {acme.record});
  const Headers h = bearer(acme.secret, {{"Content-Type", "application/json"}});
  // The same request, not streamed: what the engine reports it used.
  auto plain = post(h, body_with(R"("max_tokens":20)"));
  ASSERT_EQ(plain.status, 200);
  const std::uint64_t total = json::parse(plain.body)["usage"]["total_tokens"];
  const std::uint64_t before = settled_row("acme")["used"];
  for (bool asked : {false, true}) {
    HttpClient c(kHost, sluice_->port());
    int usage_events = 0, events = 0;
    auto r = c.stream(
        "/v1/completions",
        body_with(asked ? R"("max_tokens":20,"stream":true,"stream_options":{"include_usage":true})"
                        : R"("max_tokens":20,"stream":true)"),
        h, [&](const Response&, const SseEvent& e) {
          ++events;
          auto j = json::parse(e.data, nullptr, false);
          if (!j.is_discarded() && j.contains("usage") && !j["usage"].is_null()) ++usage_events;
          return true;
        });
    ASSERT_TRUE(r.complete) << r.error;
    EXPECT_GE(events, 20);
    EXPECT_EQ(usage_events, asked ? 1 : 0) << (asked ? "asked" : "not asked");
  }
  // Each stream was charged exactly what the engine reported.
  EXPECT_EQ(settled_row("acme")["used"].get<std::uint64_t>() - before, 2 * total);
}

// A shadow limit is counted, logged and exported, never enforced; a
// refusal names its limit in the access log.
TEST_F(QuotaTest, AShadowLimitIsCountedAndLoggedNeverEnforced) {
  Key acme = make_key("acme", "key_acme");
  start(R"(tenants:
  - id: acme
    quotas:
      - {name: trial, tokens: 10, window: 1m, mode: shadow}
      - {name: rpm, requests: 2, window: 1m}
)",
        {acme.record});
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":30)")).status, 200);
  expect_quota_refused(post(bearer(acme.secret), body_with(R"("max_tokens":30)")),
                       "rate_limit_exceeded", "quota-exceeded");
  auto lines = log_lines(3);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["quota"], "shadow:trial");
  EXPECT_EQ(lines[1]["quota"], "shadow:trial");
  EXPECT_EQ(lines[2]["quota"], "rpm");
  HttpClient admin(kHost, sluice_->admin_port());
  const json rows = json::parse(admin.request("GET", "/admin/v1/quotas?tenant=acme").body);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["name"], "trial");
  EXPECT_EQ(rows[0]["mode"], "shadow");
  EXPECT_GE(rows[0]["wouldRefuse"], 2);  // the third too: counted before rpm refused it
  EXPECT_GT(rows[0]["used"], 10);
  EXPECT_EQ(rows[1]["used"], 2);
}

// A key's own limit binds with no tenant quota anywhere in the config, and
// an embedding reserves no output.
TEST_F(QuotaTest, AKeysOwnLimitBindsWithoutAnyTenantQuota) {
  Key limited = make_key("acme", "key_limited");
  config::QuotaLimitSpec tpm;
  tpm.name = "key-tpm";
  tpm.measure = config::QuotaMeasure::kTokens;
  tpm.amount = 100;
  tpm.window = std::chrono::minutes(1);
  limited.record.quotas = {tpm};
  start("", {limited.record});
  HttpClient c(kHost, sluice_->port());
  auto e = c.post_json("/v1/embeddings", R"({"model":"mock-model","input":"hi"})",
                       bearer(limited.secret));
  EXPECT_NE(e.status, 429) << e.body;  // not refused for a 4096-token output it never makes
  expect_quota_refused(post(bearer(limited.secret), body_with(R"("max_tokens":500)")),
                       "insufficient_quota", "quota-exhausted");
  EXPECT_EQ(post(bearer(limited.secret), body_with(R"("max_tokens":5)")).status, 200);
}

TEST_F(QuotaTest, AKeysOwnLimitIsChargedBesideItsTenants) {
  Key limited = make_key("acme", "key_limited");
  config::QuotaLimitSpec one;
  one.name = "one-a-minute";
  one.measure = config::QuotaMeasure::kRequests;
  one.amount = 1;
  one.window = std::chrono::minutes(1);
  limited.record.quotas = {one};
  Key free = make_key("acme", "key_free");
  start(R"(tenants:
  - id: acme
    quotas:
      - {name: rpm, requests: 100, window: 1m}
)",
        {limited.record, free.record});
  auto first = post(bearer(limited.secret), body_with(R"("max_tokens":2)"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-ratelimit-limit-requests"), "1");  // the tightest
  EXPECT_EQ(first.header("x-ratelimit-remaining-requests"), "0");
  auto second = post(bearer(limited.secret), body_with(R"("max_tokens":2)"));
  expect_quota_refused(second, "rate_limit_exceeded", "quota-exceeded");
  EXPECT_NE(second.body.find("one-a-minute"), std::string::npos) << second.body;
  auto other = post(bearer(free.secret), body_with(R"("max_tokens":2)"));
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.header("x-ratelimit-limit-requests"), "100");
  EXPECT_TRUE(eventually([&] { return engine_requests() == 2u; }));
}

// onExceeded: queue: a request over a limit waits for the window to make
// room (within its TTL) instead of being refused; one whose TTL ends first
// is refused at once, as with refuse; another tenant is not held up.
TEST_F(QuotaTest, AQueueLimitWaitsForRoomWithinTheRequestsTtl) {
  Key acme = make_key("acme", "key_acme");
  Key beta = make_key("beta", "key_beta");
  start(R"(tenants:
  - id: acme
    quotas:
      - {name: rps, requests: 2, window: 2s, onExceeded: queue}
)",
        {acme.record, beta.record});
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(post(bearer(acme.secret), body_with(R"("max_tokens":5)")).status, 200);
  // A TTL of 50 ms: the window has no room that soon.
  Headers short_ttl = bearer(acme.secret);
  short_ttl.emplace_back("x-gateway-inference-ttl-ms", "50");
  auto refused = post(short_ttl, body_with(R"("max_tokens":5)"));
  expect_quota_refused(refused, "rate_limit_exceeded", "quota-exceeded");
  // The default TTL (a minute): it waits until the window has room.
  auto waited = post(bearer(acme.secret), body_with(R"("max_tokens":5)"));
  EXPECT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(post(bearer(beta.secret), body_with(R"("max_tokens":5)")).status, 200);
  EXPECT_TRUE(eventually([&] { return engine_requests() == 4u; }));
  // The books: three acme requests spent (two before, one after the wait).
  auto lines = log_lines(5);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[2]["status"], 429);
  EXPECT_EQ(lines[2]["quota"], "rps");
}

// Two replicas share a tenant's limit through Redis (issue 41, item 3):
// each admits from its lease (the first request waits for one, then is
// served), the spend of one is the other's, and the fleet never serves
// more than the limit: a request that fits no lease is refused on either
// replica without reaching the engine.
TEST_F(QuotaTest, TwoReplicasShareOneLimitThroughRedis) {
  SLUICE_REQUIRE(redis_server_bin(), "redis-server", kRedisPackage);
  TempDir dir;
  RedisServer redis(dir.path);
  ASSERT_TRUE(redis.start());
  Key acme = make_key("acme", "key_acme");
  const std::string tenants = R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 200, window: 1m}
)";
  auto fleet = [&](const std::string& id) {
    return "redis:\n  unixSocket: " + redis.socket() + "\n  replicaId: " + id +
           "\n  syncInterval: 10ms\n  lease: 1s\n  timeout: 100ms\n" + tenants;
  };
  start(fleet("r1"), {acme.record});
  TempFile cfg2(make_config({mock_->address()}) + "auth:\n  apiKeys: {file: " + keys_->path() +
                ", pollInterval: 50ms}\n" + fleet("r2"));
  auto second = start_sluice(cfg2);
  ASSERT_TRUE(second);
  auto post_to = [&](const Process& p, const std::string& limits) {
    HttpClient c(kHost, p.port());
    return c.post_json("/v1/completions", body_with(limits), bearer(acme.secret));
  };
  // Each replica's first request waits for its lease, and is served.
  std::uint64_t used = 0;
  for (const Process* p : {sluice_.get(), second.get()}) {
    auto r = post_to(*p, R"("max_tokens":30)");
    ASSERT_EQ(r.status, 200) << r.body;
    used += json::parse(r.body)["usage"]["total_tokens"].get<std::uint64_t>();
  }
  // Spent on both: each replica sees the fleet's spend once synced.
  for (const Process* p : {sluice_.get(), second.get()}) {
    HttpClient admin(kHost, p->admin_port());
    EXPECT_TRUE(eventually([&] {
      auto v = admin.request("GET", "/admin/v1/quotas?tenant=acme");
      return v.status == 200 && json::parse(v.body).at(0)["used"] == used;
    })) << admin.request("GET", "/admin/v1/quotas?tenant=acme").body;
  }
  // Alternate replicas until refused: the fleet serves at most the limit.
  int served = 2;
  Response refused;
  for (int i = 0; i < 20 && refused.status == 0; ++i) {
    auto r = post_to(i % 2 ? *second : *sluice_, R"("max_tokens":30)");
    if (r.status == 200) {
      ++served;
      used += json::parse(r.body)["usage"]["total_tokens"].get<std::uint64_t>();
    } else {
      refused = r;
    }
  }
  EXPECT_LE(used, 200u);
  expect_quota_refused(refused, "rate_limit_exceeded", "quota-exceeded");
  EXPECT_TRUE(eventually([&] {
    return engine_requests(*sluice_) + engine_requests(*second) == static_cast<std::size_t>(served);
  })) << "a refused request reached the engine";
  HttpClient admin(kHost, sluice_->admin_port());
  auto m = admin.request("GET", "/metrics");
  const std::string waits = "sluice_quota_lease_waits_total{tenant=\"acme\",quota=\"tpm\"} ";
  const auto at = m.body.find(waits);
  ASSERT_NE(at, std::string::npos) << m.body;
  EXPECT_GE(std::stoul(m.body.substr(at + waits.size())), 1u) << "the first request waited";
  EXPECT_NE(m.body.find("sluice_quota_fleet_degraded 0"), std::string::npos);
  // An operator's reset through one replica is every replica's: both count
  // nothing, and the tenant is served again on either.
  EXPECT_EQ(admin.request("POST", "/admin/v1/quotas/acme/reset").status, 200);
  for (const Process* p : {sluice_.get(), second.get()}) {
    HttpClient a(kHost, p->admin_port());
    EXPECT_TRUE(eventually([&] {
      auto v = a.request("GET", "/admin/v1/quotas?tenant=acme");
      return v.status == 200 && json::parse(v.body).at(0)["used"] == 0;
    })) << a.request("GET", "/admin/v1/quotas?tenant=acme").body;
  }
  EXPECT_EQ(post_to(*second, R"("max_tokens":30)").status, 200);
}

}  // namespace
}  // namespace sluice::test
