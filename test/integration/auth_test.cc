// Identity end to end: API keys from a watched key file, tenant policy,
// trusted proxies. Each hostile input is sent, and the test checks the
// status, the reason, and that nothing else was lost (the next good request
// is served, the accounting names the right tenant).
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "auth/api_keys.h"
#include "flow_control_harness.h"
#include "key_harness.h"
#include "support/fake_upstream.h"
#include "support/redis_server.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::string key_file(const std::vector<auth::KeyRecord>& records) {
  return auth::render_key_file(records);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The access log's lines as JSON, waiting until `n` are there.
std::vector<json> log_lines(const std::string& path, std::size_t n) {
  std::vector<json> out;
  eventually([&] {
    out.clear();
    std::istringstream in(read_file(path));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(json::parse(line));
    return out.size() >= n;
  });
  return out;
}

constexpr const char* kObjectives = R"(objectives:
  - {name: interactive, priority: 10}
  - {name: standard, priority: 5}
  - {name: basic, priority: 0}
  - {name: batch, priority: -10}
)";

class AuthTest : public ::testing::Test {
 protected:
  void start(const std::string& extra, const std::vector<auth::KeyRecord>& records,
             const std::string& upstream = "") {
    keys_ = std::make_unique<TempFile>(key_file(records), "keys.yaml");
    log_ = std::make_unique<TempFile>("", "access.log");
    std::string endpoint = upstream;
    if (endpoint.empty()) {
      mock_ = start_mock();
      endpoint = mock_->address();
    }
    std::string c = make_config({endpoint}, "  accessLog: " + log_->path() + "\n") + kObjectives +
                    "auth:\n  apiKeys: {file: " + keys_->path() + ", pollInterval: 50ms}\n" + extra;
    cfg_ = std::make_unique<TempFile>(c);
    sluice_ = start_sluice(*cfg_);
    ASSERT_TRUE(sluice_);
  }
  std::uint16_t port() const { return sluice_->port(); }
  Response post(const Headers& h, const std::string& body = completion_body(2)) {
    HttpClient c(kHost, port());
    return c.post_json("/v1/completions", body, h);
  }
  void expect_refused(const Response& r, int status, const std::string& code,
                      const std::string& reason) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), reason);
    auto body = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << r.body;
    EXPECT_EQ(body["error"]["code"], code) << r.body;
  }

  std::unique_ptr<Process> mock_;
  std::unique_ptr<TempFile> keys_, log_, cfg_;
  std::unique_ptr<Process> sluice_;
};

TEST_F(AuthTest, AValidKeyIsItsTenantsFlowWhateverTheHeadersSay) {
  Key acme = make_key("acme", "key_acme");
  Key beta = make_key("beta", "key_beta");
  start("", {acme.record, beta.record});
  // Steering headers naming the other tenant: the key's tenant wins.
  auto r = post(bearer(acme.secret, flow("beta")));
  ASSERT_EQ(r.status, 200) << r.body;
  r = post(bearer(beta.secret));
  ASSERT_EQ(r.status, 200) << r.body;
  auto lines = log_lines(log_->path(), 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["flow"], "acme");
  EXPECT_EQ(lines[0]["tenant"], "acme");
  EXPECT_EQ(lines[0]["key_id"], "key_acme");
  EXPECT_EQ(lines[1]["flow"], "beta");
  // The key is never written anywhere: only its id.
  EXPECT_EQ(read_file(log_->path()).find(acme.secret.substr(14)), std::string::npos);
  // Per-tenant usage and the auth results are counted.
  HttpClient admin(kHost, sluice_->admin_port());
  auto m = admin.request("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(sluice_tenant_requests_total{tenant="acme",outcome="served"} 1)"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find(R"(sluice_auth_requests_total{result="ok"} 2)"), std::string::npos);
  EXPECT_NE(m.body.find(R"(sluice_tenant_output_tokens_total{tenant="acme"} 2)"),
            std::string::npos);
}

TEST_F(AuthTest, MissingUnknownExpiredDisabledAndRepeatedCredentials) {
  Key good = make_key("acme", "key_good");
  Key old = make_key("acme", "key_old");
  Key off = make_key("acme", "key_off");
  old.record.expires_at = 1000;  // 1970
  off.record.disabled = true;
  start("", {good.record, old.record, off.record});
  auto r = post({});
  expect_refused(r, 401, "invalid_api_key", "missing-credentials");
  EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"sluice\"");
  r = post(bearer("sk-sluice-not-a-key"));
  expect_refused(r, 401, "invalid_api_key", "unknown-key");
  EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"sluice\", error=\"invalid_token\"");
  expect_refused(post(bearer(old.secret)), 401, "invalid_api_key", "key-expired");
  expect_refused(post(bearer(off.secret)), 401, "invalid_api_key", "key-disabled");
  expect_refused(post({{"Authorization", "Basic " + good.secret}}), 401, "invalid_api_key",
                 "malformed-credentials");
  // Two Authorization headers: which one counts is anyone's guess.
  {
    const std::string body = completion_body(1);
    RawConnection twice(kHost, port());
    ASSERT_TRUE(twice.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           good.secret + "\r\nAuthorization: Bearer " + good.secret +
                           "\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
    bool closed = false;
    const std::string text = twice.read_until_close(5000ms, &closed);
    EXPECT_NE(text.find("HTTP/1.1 400"), std::string::npos) << text;
    EXPECT_NE(text.find("repeated-authorization-header"), std::string::npos) << text;
  }
  // Refused before the body: a large body is never read (the connection closes).
  RawConnection raw(kHost, port());
  ASSERT_TRUE(
      raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/json\r\nContent-Length: 1000000\r\n\r\n{"));
  bool closed = false;
  const std::string text = raw.read_until_close(5000ms, &closed);
  EXPECT_NE(text.find("HTTP/1.1 401"), std::string::npos) << text;
  EXPECT_TRUE(closed);
  // Nothing else was lost; the refused ones are in the log with the key's id.
  EXPECT_EQ(post(bearer(good.secret)).status, 200);
  auto lines = log_lines(log_->path(), 8);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[2]["outcome"], "key-expired");
  EXPECT_EQ(lines[2]["key_id"], "key_old");
  EXPECT_EQ(lines[2]["status"], 401);
  EXPECT_EQ(lines[2]["tenant"], "");
  HttpClient admin(kHost, sluice_->admin_port());
  auto m = admin.request("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(sluice_auth_requests_total{result="key-disabled"} 1)"),
            std::string::npos)
      << m.body;
}

TEST_F(AuthTest, KeysAddedAndRevokedInTheFileApplyWhileServing) {
  Key a = make_key("acme", "key_a");
  Key b = make_key("acme", "key_b");
  start("", {a.record});
  EXPECT_EQ(post(bearer(a.secret)).status, 200);
  EXPECT_EQ(post(bearer(b.secret)).status, 401);
  // Revoke a, add b: written whole, then renamed over (as an editor does).
  { std::ofstream(keys_->path() + ".new") << key_file({b.record}); }
  ASSERT_EQ(std::rename((keys_->path() + ".new").c_str(), keys_->path().c_str()), 0);
  EXPECT_TRUE(eventually([&] { return post(bearer(b.secret)).status == 200; }));
  EXPECT_EQ(post(bearer(a.secret)).status, 401);
  // A broken file keeps the keys in use: asserted once the watcher has
  // read it and refused it (its counter), not at a guess of when it looks.
  const std::string failed = R"(sluice_key_file_loads_total{result="failed"})";
  const std::string loaded = R"(sluice_key_file_loads_total{result="ok"})";
  EXPECT_EQ(scrape_metric(kHost, sluice_->admin_port(), failed), 0);
  const double loads = scrape_metric(kHost, sluice_->admin_port(), loaded);
  EXPECT_GE(loads, 2);  // the start and the change above
  { std::ofstream(keys_->path() + ".new") << "keys: [{id: x}]"; }
  ASSERT_EQ(std::rename((keys_->path() + ".new").c_str(), keys_->path().c_str()), 0);
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, sluice_->admin_port(), failed) == 1; }));
  EXPECT_EQ(scrape_metric(kHost, sluice_->admin_port(), loaded), loads);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(post(bearer(b.secret)).status, 200);
  EXPECT_EQ(post(bearer(a.secret)).status, 401);
}

TEST_F(AuthTest, TenantPolicyModelsObjectivesMaxTokens) {
  Key clamp = make_key("clamped", "key_c");
  Key strict = make_key("strict", "key_s");
  FakeUpstream up([](const UpstreamRequest&) {
    return FakeUpstream::Reply{FakeUpstream::response(
        200, R"({"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}})")};
  });
  start(R"(tenants:
  - id: clamped
    maxObjective: standard
    defaultObjective: basic
    models: [mock-model, "family/*"]
    maxTokens: 16
  - id: strict
    maxObjective: standard
    aboveMaxObjective: refuse
    maxTokens: 16
    aboveMaxTokens: refuse
)",
        {clamp.record, strict.record}, up.address());
  // A model outside the tenant's list.
  auto body = [](const std::string& model, int max_tokens) {
    return R"({"model":")" + model + R"(","prompt":"x","max_tokens":)" +
           std::to_string(max_tokens) + "}";
  };
  expect_refused(post(bearer(clamp.secret), body("other-model", 1)), 403, "model_not_allowed",
                 "model-not-allowed");
  auto fam = post(bearer(clamp.secret), body("family/7b", 1));
  EXPECT_EQ(fam.status, 200) << fam.body;
  // Above the ceiling: clamped to it, or refused.
  auto r = post(bearer(clamp.secret, {{"x-llm-d-inference-objective", "interactive"}}),
                body("mock-model", 500));
  EXPECT_EQ(r.status, 200) << r.body;
  expect_refused(post(bearer(strict.secret, {{"x-llm-d-inference-objective", "interactive"}}),
                      body("mock-model", 1)),
                 403, "objective_not_allowed", "objective-not-allowed");
  expect_refused(post(bearer(strict.secret), body("mock-model", 17)), 400, "max_tokens_exceeded",
                 "max-tokens-exceeded");
  // No max_tokens at all: the ceiling is written in.
  HttpClient c(kHost, port());
  EXPECT_EQ(c.post_json("/v1/completions", R"({"model":"mock-model","prompt":"x"})",
                        bearer(strict.secret))
                .status,
            200);
  // The inference requests (the model catalogue's GET /v1/models polls too).
  std::vector<UpstreamRequest> seen;
  for (auto& q : up.requests())
    if (q.head.rfind("POST ", 0) == 0) seen.push_back(q);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(json::parse(seen[1].body)["max_tokens"], 16);  // clamped from 500
  EXPECT_EQ(json::parse(seen[2].body)["max_tokens"], 16);  // written in
  // The tenant's key never reaches the engine.
  for (const auto& s : seen) EXPECT_EQ(s.header("authorization"), "") << s.head;
  auto lines = log_lines(log_->path(), 6);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[1]["objective"], "basic");     // the default
  EXPECT_EQ(lines[2]["objective"], "standard");  // clamped from interactive
  EXPECT_EQ(lines[2]["priority"], 5);
}

TEST_F(AuthTest, ConcurrencyLimitAndSubflows) {
  Key k = make_key("acme", "key_k");
  Key other = make_key("beta", "key_o");
  start(R"(tenants:
  - {id: acme, maxConcurrency: 1, subflows: [ui]}
)",
        {k.record, other.record});
  HttpClient streaming(kHost, port());
  Response second;
  Response beta;
  auto result = streaming.stream(
      "/v1/completions", completion_body(4, true),
      bearer(k.secret, {{"Content-Type", "application/json"}}),
      [&](const Response&, const SseEvent&) {
        if (second.status == 0) {
          second = post(bearer(k.secret));    // while the first is in flight
          beta = post(bearer(other.secret));  // another tenant is not limited by it
        }
        return true;
      });
  EXPECT_EQ(result.head.status, 200);
  EXPECT_TRUE(result.complete) << result.error;
  expect_refused(second, 429, "tenant_concurrency_limit", "tenant-concurrency-limit");
  EXPECT_EQ(second.header("retry-after"), "1");
  EXPECT_EQ(beta.status, 200);
  // Once the first ended, the permit is back.
  EXPECT_EQ(post(bearer(k.secret, flow("ui"))).status, 200);
  EXPECT_EQ(post(bearer(k.secret, flow("beta"))).status, 200);
  auto lines = log_lines(log_->path(), 5);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[3]["flow"], "acme/ui");  // a sub-flow it may choose
  EXPECT_EQ(lines[4]["flow"], "acme");     // never another tenant's flow
}

TEST_F(AuthTest, KeysMadeAndRevokedThroughTheAdminApi) {
  start("", {});
  HttpClient admin(kHost, sluice_->admin_port());
  auto made = admin.request("POST", "/admin/v1/keys", R"({"tenant": "acme", "id": "key_ops"})",
                            {{"Content-Type", "application/json"}});
  ASSERT_EQ(made.status, 201) << made.body;
  const json k = json::parse(made.body);
  const std::string key = k["key"];
  EXPECT_EQ(key.rfind("sk-sluice-", 0), 0u);
  EXPECT_EQ(k["prefix"], key.substr(0, 14));
  // Usable as soon as the answer came, with no file poll in between.
  EXPECT_EQ(post(bearer(key)).status, 200);
  // The key is shown once: not in the list, not in the file, not in a log.
  auto list = admin.request("GET", "/admin/v1/keys");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body.find(key.substr(14)), std::string::npos);
  EXPECT_NE(list.body.find("key_ops"), std::string::npos);
  EXPECT_EQ(read_file(keys_->path()).find(key.substr(14)), std::string::npos);
  EXPECT_NE(read_file(keys_->path()).find("key_ops"), std::string::npos);
  EXPECT_EQ(admin.request("GET", "/admin/v1/keys/key_ops").status, 200);
  // Bad bodies are typed.
  EXPECT_EQ(admin.request("POST", "/admin/v1/keys", R"({"tenant": "a/b"})").status, 400);
  EXPECT_EQ(admin.request("POST", "/admin/v1/keys", R"({"tenant": "a", "id": "key_ops"})").status,
            409);
  EXPECT_EQ(admin.request("POST", "/admin/v1/keys", R"({"tenant": "a", "expires": "soon"})").status,
            400);
  // Disabled, then revoked: refused as soon as each answer came.
  EXPECT_EQ(admin.request("PUT", "/admin/v1/keys/key_ops", R"({"disabled": true})").status, 200);
  expect_refused(post(bearer(key)), 401, "invalid_api_key", "key-disabled");
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/keys/key_ops").status, 200);
  expect_refused(post(bearer(key)), 401, "invalid_api_key", "unknown-key");
  EXPECT_EQ(admin.request("DELETE", "/admin/v1/keys/key_ops").status, 404);
  // A restart keeps what the admin API made: it is in the key file.
  auto again = admin.request("POST", "/admin/v1/keys", R"({"tenant": "beta"})");
  ASSERT_EQ(again.status, 201);
  const std::string second = json::parse(again.body)["key"];
  EXPECT_EQ(sluice_->stop(), 0);
  sluice_ = start_sluice(*cfg_);
  EXPECT_EQ(post(bearer(second)).status, 200);
}

TEST(AuthModels, ARestrictedTenantSeesOnlyItsModels) {
  auto a = start_mock({"--model", "llama-3-8b"});
  auto b = start_mock({"--model", "qwen/2.5-7b"});
  Key narrow = make_key("narrow", "key_n");
  Key wide = make_key("wide", "key_w");
  TempFile keys(key_file({narrow.record, wide.record}), "keys.yaml");
  TempFile cfg(make_config({a->address(), b->address()}) + "auth:\n  apiKeys: {file: " +
               keys.path() + "}\ntenants:\n  - {id: narrow, models: ['qwen/*']}\n");
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  auto ids = [&](const Key& k) {
    auto r = c.request("GET", "/v1/models", "", bearer(k.secret));
    std::vector<std::string> out;
    auto j = json::parse(r.body, nullptr, false);
    if (r.status == 200 && j.is_object() && j["data"].is_array())
      for (const auto& m : j["data"]) out.push_back(m.value("id", ""));
    return out;
  };
  // Once the catalogue has both endpoints' answers: only qwen/*.
  EXPECT_TRUE(eventually([&] { return ids(narrow) == std::vector<std::string>{"qwen/2.5-7b"}; }))
      << testing::PrintToString(ids(narrow));
  // A tenant without a model list gets an endpoint's own answer, as sent.
  const auto all = ids(wide);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0] == "llama-3-8b" || all[0] == "qwen/2.5-7b");
  // Without credentials: 401 here too.
  EXPECT_EQ(c.request("GET", "/v1/models").status, 401);
}

// A key made through the admin API with a scope: it sees and may use only
// its own models, within its tenant's; the scope is listed (never the key)
// and survives in the key file; a bad scope is a typed 400.
TEST(AuthModels, AScopedKeySeesAndUsesOnlyItsOwnModels) {
  auto a = start_mock({"--model", "llama-3-8b"});
  auto b = start_mock({"--model", "qwen/2.5-7b"});
  TempFile keys("", "keys.yaml");
  TempFile cfg(make_config({a->address(), b->address()}) +
               "auth:\n  apiKeys: {file: " + keys.path() + "}\n");
  auto sluice = start_sluice(cfg);
  HttpClient admin(kHost, sluice->admin_port());
  const Headers json_type{{"Content-Type", "application/json"}};
  auto made = admin.request(
      "POST", "/admin/v1/keys",
      R"({"tenant": "acme", "id": "key_scoped", "models": ["qwen/*"], "maxTokens": 8})", json_type);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string key = json::parse(made.body)["key"];
  auto plain = admin.request("POST", "/admin/v1/keys", R"({"tenant": "acme"})", json_type);
  ASSERT_EQ(plain.status, 201) << plain.body;
  const std::string unscoped = json::parse(plain.body)["key"];
  HttpClient c(kHost, sluice->port());
  auto ids = [&](const std::string& k) {
    auto r = c.request("GET", "/v1/models", "", bearer(k));
    std::vector<std::string> out;
    auto j = json::parse(r.body, nullptr, false);
    if (r.status == 200 && j.is_object() && j["data"].is_array())
      for (const auto& m : j["data"]) out.push_back(m.value("id", ""));
    return out;
  };
  EXPECT_TRUE(eventually([&] { return ids(key) == std::vector<std::string>{"qwen/2.5-7b"}; }))
      << testing::PrintToString(ids(key));
  auto chat = [&](const std::string& k, const std::string& model) {
    return c.post_json("/v1/completions",
                       R"({"model":")" + model + R"(","prompt":"x","max_tokens":2})", bearer(k));
  };
  auto refused = chat(key, "llama-3-8b");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.header("x-gateway-inference-dropped-reason"), "model-not-allowed");
  EXPECT_EQ(chat(key, "qwen/2.5-7b").status, 200);
  // The same tenant's other key is not narrowed.
  EXPECT_EQ(chat(unscoped, "llama-3-8b").status, 200);
  // Listed with its scope; written to the key file with it.
  auto listed = json::parse(admin.request("GET", "/admin/v1/keys/key_scoped").body);
  EXPECT_EQ(listed["models"], json::array({"qwen/*"}));
  EXPECT_EQ(listed["maxTokens"], 8);
  EXPECT_EQ(listed.find("key"), listed.end());
  std::vector<auth::KeyRecord> back;
  std::string error;
  ASSERT_TRUE(auth::parse_key_file(read_file(keys.path()), back, error)) << error;
  bool found = false;
  for (const auto& r : back)
    if (r.id == "key_scoped") found = r.models == std::vector<std::string>{"qwen/*"};
  EXPECT_TRUE(found);
  for (const char* bad :
       {R"({"tenant": "t", "models": "qwen"})", R"({"tenant": "t", "models": ["a*b"]})",
        R"({"tenant": "t", "maxTokens": -1})", R"({"tenant": "t", "maxObjective": 3})"}) {
    auto r = admin.request("POST", "/admin/v1/keys", bad, json_type);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("invalid-scope"), std::string::npos) << r.body;
  }
  // Nothing else lost: the scoped key still works.
  EXPECT_EQ(chat(key, "qwen/2.5-7b").status, 200);
}

// The catalogue's GET /v1/models polls authenticate to the engine as the
// requests do (server.upstreamCredentialFile).
TEST(AuthModels, TheCataloguePollsCarryTheEnginesCredential) {
  FakeUpstream up([](const UpstreamRequest&) {
    return FakeUpstream::Reply{
        FakeUpstream::response(200, R"({"object":"list","data":[{"id":"m"}]})")};
  });
  Key k = make_key("t", "key_t");
  TempFile keys(key_file({k.record}), "keys.yaml");
  TempFile token("engine-token\n", "engine.token");
  TempFile cfg(make_config({up.address()}, "  upstreamCredentialFile: " + token.path() + "\n") +
               "auth:\n  apiKeys: {file: " + keys.path() + "}\n");
  auto sluice = start_sluice(cfg);
  auto polls = [&] {
    std::vector<UpstreamRequest> out;
    for (auto& r : up.requests())
      if (r.head.rfind("GET /v1/models ", 0) == 0) out.push_back(r);
    return out;
  };
  ASSERT_TRUE(eventually([&] { return !polls().empty(); }));
  for (const auto& r : polls()) EXPECT_EQ(r.header("authorization"), "Bearer engine-token");
}

TEST(AuthFleet, AKeyMadeOnOneReplicaWorksOnAllAndItsRevocationReachesThemInOneSync) {
  SLUICE_REQUIRE(redis_server_bin(), "redis-server", ::sluice::test::kRedisPackage);
  TempDir dir;
  RedisServer redis(dir.path);
  ASSERT_TRUE(redis.start());
  auto mock = start_mock();
  auto config = [&](const std::string& id) {
    return make_config({mock->address()}) +
           "auth:\n  apiKeys: {}\nredis:\n  unixSocket: " + redis.socket() +
           "\n  replicaId: " + id + "\n  syncInterval: 25ms\n  lease: 1s\n  timeout: 100ms\n";
  };
  TempFile c1(config("r1")), c2(config("r2"));
  auto r1 = start_sluice(c1);
  auto r2 = start_sluice(c2);
  HttpClient a1(kHost, r1->admin_port());
  auto made = a1.request("POST", "/admin/v1/keys", R"({"tenant": "acme"})");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string key = json::parse(made.body)["key"];
  const std::string id = json::parse(made.body)["id"];
  HttpClient c2c(kHost, r2->port());
  auto on_r2 = [&] {
    return c2c.post_json("/v1/completions", completion_body(1), bearer(key)).status;
  };
  EXPECT_TRUE(eventually([&] { return on_r2() == 200; })) << "the key never reached r2";
  // Revoked through r1: r2 refuses it within a sync or two (25 ms each;
  // measured from r1's answer).
  ASSERT_EQ(a1.request("DELETE", "/admin/v1/keys/" + id).status, 200);
  const auto revoked = Clock::now();
  EXPECT_TRUE(eventually([&] { return on_r2() == 401; }, 2000ms));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - revoked);
  RecordProperty("revocation_seen_ms", static_cast<int>(took.count()));
  std::cout << "revocation reached the other replica in " << took.count() << " ms\n";
  // A replica that starts later applies the revocation too.
  TempFile c3(config("r3"));
  auto r3 = start_sluice(c3);
  HttpClient c3c(kHost, r3->port());
  HttpClient probe(kHost, r3->admin_port());
  ASSERT_TRUE(eventually([&] { return probe.request("GET", "/readyz").status == 200; }));
  EXPECT_EQ(c3c.post_json("/v1/completions", completion_body(1), bearer(key)).status, 401);
}

TEST(AuthTrusted, TrustedProxyHeadersStandAndOthersLoseThem) {
  auto mock = start_mock();
  TempFile log("", "access.log");
  // 127.0.0.1 is trusted; 127.0.0.2 is another client.
  TempFile cfg(make_config({mock->address()}, "  accessLog: " + log.path() + "\n") +
               "auth:\n  trustedProxies: [127.0.0.1/32]\n");
  auto sluice = start_sluice(cfg);
  HttpClient trusted(kHost, sluice->port());
  EXPECT_EQ(trusted.post_json("/v1/completions", completion_body(1), flow("tenant-x")).status, 200);
  RawConnection other(kHost, sluice->port(), 0, "127.0.0.2");
  const std::string body = completion_body(1);
  ASSERT_TRUE(
      other.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nx-llm-d-inference-fairness-id: tenant-x\r\n"
                 "Connection: close\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body));
  bool closed = false;
  EXPECT_NE(other.read_until_close(5000ms, &closed).find("HTTP/1.1 200"), std::string::npos);
  auto lines = log_lines(log.path(), 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["flow"], "tenant-x");
  EXPECT_EQ(lines[1]["flow"], "default-flow");
}

}  // namespace
}  // namespace sluice::test
