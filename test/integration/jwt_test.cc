// JWT end to end: tokens signed by an identity provider whose keys are a
// JWKS file sluice watches. Every hostile token named in the issue is sent
// and refused with its reason; a flood of unknown kids is not a flood of
// JWKS loads; nothing else is lost.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "auth/crypto.h"
#include "flow_control_harness.h"
#include "support/fake_upstream.h"
#include "support/jwt_signer.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string claims(const std::string& sub, std::int64_t exp_in = 600,
                   const std::string& extra = "") {
  return R"({"iss":"https://idp.test/","aud":"sluice","sub":")" + sub + R"(","exp":)" +
         std::to_string(now_unix() + exp_in) + extra + "}";
}

double metric(std::uint16_t admin_port, const std::string& name) {
  return scrape_metric(kHost, admin_port, name);
}

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rsa_ = generate_key(auth::JwtAlg::kRS256, "rsa-1");
    ec_ = generate_key(auth::JwtAlg::kES256, "ec-1");
    jwks_ = std::make_unique<TempFile>(jwks_of(std::vector<const SigningKey*>{&rsa_, &ec_}),
                                       "jwks.json");
  }
  // `upstream`: the engine's address ("": a sluice-mock started here).
  void start(const std::string& server_extra = "", const std::string& jwt_extra = "",
             const std::string& leeway = "30s", const std::string& upstream = "") {
    std::string engine = upstream;
    if (engine.empty()) {
      mock_ = start_mock();
      engine = mock_->address();
    }
    log_ = std::make_unique<TempFile>("", "access.log");
    cfg_ = std::make_unique<TempFile>(
        make_config({engine}, "  accessLog: " + log_->path() + "\n" + server_extra) +
        "objectives:\n  - {name: interactive, priority: 10}\n"
        "  - {name: standard, priority: 5}\n"
        "auth:\n  jwt:\n    jwksFile: " +
        jwks_->path() +
        "\n    issuer: https://idp.test/\n    audiences: [sluice]\n    objectiveClaim: tier\n"
        "    leeway: " +
        leeway + "\n" + jwt_extra);
    sluice_ = start_sluice(*cfg_);
    ASSERT_TRUE(sluice_);
  }
  Response post_token(const std::string& token, const std::string& body = completion_body(1),
                      Headers more = {}) {
    HttpClient c(kHost, sluice_->port());
    more.emplace_back("Authorization", "Bearer " + token);
    return c.post_json("/v1/completions", body, more);
  }
  void expect_token_refused(const std::string& token, const std::string& reason) {
    auto r = post_token(token);
    EXPECT_EQ(r.status, 401) << reason << ": " << r.body;
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), reason) << r.body;
    auto body = json::parse(r.body, nullptr, false);
    EXPECT_EQ(body["error"]["code"], "invalid_api_key") << r.body;
    EXPECT_NE(r.header("www-authenticate").find("invalid_token"), std::string::npos);
  }
  std::string log_text() {
    std::ifstream in(log_->path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  SigningKey rsa_, ec_;
  std::unique_ptr<TempFile> jwks_, log_, cfg_;
  std::unique_ptr<Process> mock_, sluice_;
};

TEST_F(JwtTest, ValidTokensAreTheirSubjectsFlowAndObjective) {
  start();
  auto r = post_token(make_token(rsa_, claims("acme", 600, R"(,"tier":"interactive")")));
  EXPECT_EQ(r.status, 200) << r.body;
  r = post_token(make_token(ec_, claims("beta")));
  EXPECT_EQ(r.status, 200) << r.body;
  // The same token again: from the thread's cache (no second verification
  // to observe here, but the answer must be the same).
  const std::string again = make_token(ec_, claims("beta"));
  EXPECT_EQ(post_token(again).status, 200);
  EXPECT_EQ(post_token(again).status, 200);
  EXPECT_TRUE(eventually([&] { return log_text().find(R"("flow":"beta")") != std::string::npos; }));
  const std::string log = log_text();
  EXPECT_NE(
      log.find(R"("flow":"acme","tenant":"acme","key_id":"jwt:rsa-1","objective":"interactive")"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find(R"("key_id":"jwt:ec-1")"), std::string::npos);
}

// A token's scope claims narrow its tenant's policy, on the first sight of
// the token and from the cache alike; a malformed one refuses the token.
TEST_F(JwtTest, ATokensModelsClaimNarrowsWhatItMayUse) {
  start("", "    modelsClaim: models\n    maxTokensClaim: max_tokens\n");
  const std::string other = make_token(rsa_, claims("acme", 600, R"(,"models":["other-*"])"));
  for (int i = 0; i < 2; ++i) {  // verified, then from the cache
    auto r = post_token(other);
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), "model-not-allowed");
  }
  const std::string mine =
      make_token(ec_, claims("acme", 600, R"(,"models":"mock-* x","max_tokens":4)"));
  EXPECT_EQ(post_token(mine).status, 200);
  EXPECT_EQ(post_token(mine).status, 200);
  // The same tenant without the claim is not narrowed.
  EXPECT_EQ(post_token(make_token(rsa_, claims("acme"))).status, 200);
  expect_token_refused(make_token(rsa_, claims("acme", 600, R"(,"models":5)")), "token-bad-scope");
  expect_token_refused(make_token(rsa_, claims("acme", 600, R"(,"max_tokens":0)")),
                       "token-bad-scope");
  EXPECT_EQ(post_token(mine).status, 200);  // nothing else lost
}

TEST_F(JwtTest, EveryHostileTokenIsRefusedWithItsReason) {
  start();
  const std::string good = claims("acme");
  const std::string h = default_header(rsa_);
  auto b64 = [](std::string_view s) { return auth::base64url_encode(s); };
  // alg none, with and without a signature.
  const std::string none_header = R"({"alg":"none","typ":"JWT","kid":"rsa-1"})";
  expect_token_refused(b64(none_header) + "." + b64(good) + ".", "token-alg-not-allowed");
  expect_token_refused(b64(none_header) + "." + b64(good) + "." + b64("x"),
                       "token-alg-not-allowed");
  // HS256 keyed by the RSA public key (the classic confusion attack).
  const std::string hs_header = R"({"alg":"HS256","typ":"JWT","kid":"rsa-1"})";
  const std::string input = b64(hs_header) + "." + b64(good);
  expect_token_refused(input + "." + b64(hmac_sha256(public_pem(rsa_.key.get()), input)),
                       "token-alg-not-allowed");
  // Expired (past the 30 s leeway), not yet valid, wrong issuer, wrong audience.
  expect_token_refused(make_token(rsa_, claims("acme", -120)), "token-expired");
  expect_token_refused(
      make_token(rsa_, claims("acme", 600, R"(,"nbf":)" + std::to_string(now_unix() + 300))),
      "token-not-yet-valid");
  std::string wrong_iss = good;
  wrong_iss.replace(wrong_iss.find("idp.test"), 8, "evil.test");
  expect_token_refused(make_token(rsa_, wrong_iss), "token-wrong-issuer");
  std::string wrong_aud = good;
  wrong_aud.replace(wrong_aud.find(R"("aud":"sluice")"), 14, R"("aud":"other")");
  expect_token_refused(make_token(rsa_, wrong_aud), "token-wrong-audience");
  // A bad signature: the payload changed after signing.
  std::string token = make_token(rsa_, good);
  const auto dot1 = token.find('.'), dot2 = token.rfind('.');
  const std::string forged = token.substr(0, dot1 + 1) + b64(claims("beta")) + token.substr(dot2);
  expect_token_refused(forged, "token-bad-signature");
  // An unknown kid.
  auto stranger = generate_key(auth::JwtAlg::kES256, "stranger");
  expect_token_refused(make_token(stranger, good), "token-unknown-kid");
  // Bad base64url in each part, bad JSON in each signed part.
  expect_token_refused("e*J." + token.substr(dot1 + 1), "token-malformed");
  expect_token_refused(token.substr(0, dot1 + 1) + "p*y" + token.substr(dot2), "token-malformed");
  expect_token_refused(token.substr(0, dot2 + 1) + "s*g", "token-malformed");
  expect_token_refused(sign_token(rsa_, R"({"alg":"RS256","kid":"rsa-1")", good),
                       "token-malformed");
  expect_token_refused(sign_token(rsa_, h, R"({"sub":"acme","exp":)"), "token-malformed");
  // Tenants cannot be sub-flows of another tenant.
  expect_token_refused(make_token(rsa_, claims("acme/x")), "token-bad-tenant");
  // Nothing else was lost.
  EXPECT_EQ(post_token(make_token(rsa_, good)).status, 200);
  HttpClient admin(kHost, sluice_->admin_port());
  auto m = admin.request("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(sluice_auth_requests_total{result="token-alg-not-allowed"} 3)"),
            std::string::npos)
      << m.body;
}

TEST_F(JwtTest, ATokenOfSixtyFourKilobytes) {
  // Within the default header limit (16 KiB) it never reaches the verifier.
  // (Sent raw: the test's HTTP client will not write such a field.)
  auto send_raw = [&](const std::string& token) {
    const std::string body = completion_body(1);
    RawConnection raw(kHost, sluice_->port());
    EXPECT_TRUE(raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                         token + "\r\nConnection: close\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
    bool closed = false;
    return raw.read_until_close(10000ms, &closed);
  };
  const std::string huge(64 * 1024, 'a');
  start();
  EXPECT_NE(send_raw(huge + ".b.c").find("HTTP/1.1 431"), std::string::npos);
  EXPECT_EQ(post_token(make_token(rsa_, claims("acme"))).status, 200);
  // With room for it in the head, the verifier refuses it by its size.
  sluice_.reset();
  start("  maxHeaderBytes: 256Ki\n");
  const std::string text = send_raw(huge + ".b.c");
  EXPECT_NE(text.find("HTTP/1.1 401"), std::string::npos) << text.substr(0, 300);
  EXPECT_NE(text.find("token-too-long"), std::string::npos) << text.substr(0, 300);
  EXPECT_EQ(post_token(make_token(rsa_, claims("acme"))).status, 200);
}

TEST_F(JwtTest, AFloodOfUnknownKidsIsNotAFloodOfJwksLoads) {
  start("", "    jwksMinRefetchInterval: 1h\n");
  const double loads_before = metric(sluice_->admin_port(), "sluice_jwks_loads_total");
  EXPECT_EQ(loads_before, 1);  // the file, at startup
  for (int i = 0; i < 300; ++i) {
    auto k = SigningKey{auth::JwtAlg::kES256, "kid-" + std::to_string(i), nullptr};
    k.key = std::move(ec_.key);  // a known key under an unknown kid: cheap to make
    const std::string t = make_token(k, claims("acme"));
    ec_.key = std::move(k.key);
    auto r = post_token(t);
    ASSERT_EQ(r.status, 401);
    ASSERT_EQ(r.header("x-gateway-inference-dropped-reason"), "token-unknown-kid");
  }
  // One refetch at most (the first unknown kid); the next would wait an hour.
  EXPECT_LE(metric(sluice_->admin_port(), "sluice_jwks_loads_total"), loads_before + 1);
  EXPECT_EQ(post_token(make_token(ec_, claims("acme"))).status, 200);
}

TEST_F(JwtTest, ARotatedKeyIsPickedUpFromTheFile) {
  start("", "    jwksMinRefetchInterval: 10ms\n");
  auto next = generate_key(auth::JwtAlg::kES256, "ec-2");
  const std::string token = make_token(next, claims("acme"));
  EXPECT_EQ(post_token(token).status, 401);
  {
    std::ofstream(jwks_->path() + ".new")
        << jwks_of(std::vector<const SigningKey*>{&rsa_, &ec_, &next});
  }
  ASSERT_EQ(std::rename((jwks_->path() + ".new").c_str(), jwks_->path().c_str()), 0);
  // The unknown kid asks for the file again (or the watcher sees it first).
  EXPECT_TRUE(eventually([&] { return post_token(token).status == 200; }));
}

// The seams between the config and the verifier (issue 39, item 11): each
// test fails when the config's value does not reach the running verifier.

// auth.jwt.algorithms: [ES256] refuses an RS256 token even though its key
// is in the JWKS and its signature is good (the verifier's default allows
// RS256).
TEST_F(JwtTest, OnlyTheConfiguredAlgorithmsAreAccepted) {
  start("", "    algorithms: [ES256]\n");
  expect_token_refused(make_token(rsa_, claims("acme")), "token-alg-not-allowed");
  EXPECT_EQ(post_token(make_token(ec_, claims("acme"))).status, 200);
  EXPECT_EQ(metric(sluice_->admin_port(),
                   R"(sluice_auth_requests_total{result="token-alg-not-allowed"})"),
            1);
}

// auth.jwt.leeway: a token that expired 30 s ago passes with 60 s of leeway
// and is refused with 10 s (the verifier's default is 60 s, so the 10 s run
// is the one that notices a leeway left behind; the 60 s run one that
// reaches it as zero).
TEST_F(JwtTest, TheConfiguredLeewayIsTheOneApplied) {
  const std::string expired = make_token(ec_, claims("acme", -30));
  start("", "", "60s");
  EXPECT_EQ(post_token(expired).status, 200);
  sluice_.reset();
  start("", "", "10s");
  expect_token_refused(expired, "token-expired");
  EXPECT_EQ(post_token(make_token(ec_, claims("acme"))).status, 200);
}

// maxTokensClaim: the token's ceiling is what the engine receives (not
// only a 200: the body sluice forwarded, read at the engine).
TEST_F(JwtTest, TheMaxTokensClaimIsWhatTheEngineReceives) {
  FakeUpstream engine([](const UpstreamRequest&) {
    return FakeUpstream::Reply{FakeUpstream::response(
        200, R"({"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}})")};
  });
  start("", "    maxTokensClaim: max_tokens\n", "30s", engine.address());
  const std::string token = make_token(ec_, claims("acme", 600, R"(,"max_tokens":8)"));
  for (int i = 0; i < 2; ++i) {  // verified, then from the thread's cache
    auto r = post_token(token, completion_body(100));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // Under the ceiling: unchanged.
  EXPECT_EQ(post_token(token, completion_body(5)).status, 200);
  // Issue 39, item 1: the claim holds for max_completion_tokens beside a
  // small max_tokens too (the engine reads max_completion_tokens first).
  EXPECT_EQ(post_token(token, R"({"model":"m","prompt":"x","max_completion_tokens":100000,)"
                              R"("max_tokens":5})")
                .status,
            200);
  std::vector<json> bodies;
  for (const auto& q : engine.requests())
    if (q.head.rfind("POST ", 0) == 0) bodies.push_back(json::parse(q.body));
  ASSERT_EQ(bodies.size(), 4u);
  EXPECT_EQ(bodies[0]["max_tokens"], 8) << bodies[0];
  EXPECT_EQ(bodies[1]["max_tokens"], 8) << bodies[1];
  EXPECT_EQ(bodies[2]["max_tokens"], 5) << bodies[2];
  EXPECT_EQ(bodies[3]["max_completion_tokens"], 8) << bodies[3];
  EXPECT_EQ(bodies[3]["max_tokens"], 5) << bodies[3];
}

// The per-thread token cache is emptied when the JWKS changes: a token
// verified (and cached) with a key the new JWKS no longer holds is refused.
TEST_F(JwtTest, ATokenCachedBeforeItsKeyWasRemovedIsRefused) {
  start("", "    jwksMinRefetchInterval: 1h\n");
  const std::string token = make_token(ec_, claims("acme"));
  ASSERT_EQ(post_token(token).status, 200);
  ASSERT_EQ(post_token(token).status, 200);  // from the cache (one I/O thread)
  const double loads = metric(sluice_->admin_port(), "sluice_jwks_loads_total");
  ASSERT_EQ(loads, 1);
  { std::ofstream(jwks_->path() + ".new") << jwks_of(std::vector<const SigningKey*>{&rsa_}); }
  ASSERT_EQ(std::rename((jwks_->path() + ".new").c_str(), jwks_->path().c_str()), 0);
  // Counted once every I/O thread verifies with the new set.
  ASSERT_TRUE(eventually(
      [&] { return metric(sluice_->admin_port(), "sluice_jwks_loads_total") >= loads + 1; }));
  expect_token_refused(token, "token-unknown-kid");
  EXPECT_EQ(post_token(make_token(rsa_, claims("acme"))).status, 200);
}

// docs/security.md: the token's objective claim wins over the steering
// header (a client cannot raise its own priority past what its IdP gave).
TEST_F(JwtTest, TheTokensObjectiveWinsOverTheSteeringHeader) {
  start();
  const std::string token = make_token(ec_, claims("acme", 600, R"(,"tier":"standard")"));
  auto r =
      post_token(token, completion_body(1), {{"x-gateway-inference-objective", "interactive"}});
  EXPECT_EQ(r.status, 200) << r.body;
  // Without the claim the header stands (nothing above to overrule it).
  r = post_token(make_token(ec_, claims("beta")), completion_body(1),
                 {{"x-gateway-inference-objective", "interactive"}});
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<json> lines;
  ASSERT_TRUE(eventually([&] {
    lines.clear();
    std::istringstream in(log_text());
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(json::parse(line));
    return lines.size() >= 2;
  }));
  EXPECT_EQ(lines[0]["tenant"], "acme");
  EXPECT_EQ(lines[0]["objective"], "standard") << lines[0];
  EXPECT_EQ(lines[0]["priority"], 5) << lines[0];
  EXPECT_EQ(lines[1]["tenant"], "beta");
  EXPECT_EQ(lines[1]["objective"], "interactive") << lines[1];
  EXPECT_EQ(lines[1]["priority"], 10) << lines[1];
}

}  // namespace
}  // namespace sluice::test

#include <mutex>

#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

// The identity provider's JWKS over HTTP (FakeUpstream counts each fetch).
TEST(JwtUrl, KeysFromTheUrlAndUnknownKidsFetchAtMostOncePerInterval) {
  auto first = generate_key(auth::JwtAlg::kES256, "ec-1");
  auto second = generate_key(auth::JwtAlg::kRS256, "rsa-2");
  std::mutex mu;
  std::string served = jwks_of(std::vector<const SigningKey*>{&first});
  FakeUpstream idp([&](const UpstreamRequest&) {
    std::lock_guard lock(mu);
    return FakeUpstream::Reply{
        FakeUpstream::response(200, served, "Content-Type: application/json\r\n")};
  });
  auto mock = start_mock();
  auto config = [&](const std::string& min_refetch) {
    return make_config({mock->address()}) + "auth:\n  jwt:\n    jwksUrl: http://" + idp.address() +
           "/jwks.json\n    jwksMinRefetchInterval: " + min_refetch + "\n";
  };
  TempFile cfg(config("1h"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  auto post = [&](const std::string& token) {
    return c.post_json("/v1/completions", completion_body(1),
                       {{"Authorization", "Bearer " + token}});
  };
  // The first fetch is in the background: the first token may come before it.
  EXPECT_TRUE(eventually([&] { return post(make_token(first, claims("acme"))).status == 200; }));
  const std::size_t fetched = idp.requests().size();
  EXPECT_GE(fetched, 1u);
  // 200 tokens with kids the JWKS does not hold: at most one more fetch.
  for (int i = 0; i < 200; ++i) {
    auto r = post(make_token(second, claims("acme")));
    ASSERT_EQ(r.status, 401);
    ASSERT_EQ(r.header("x-gateway-inference-dropped-reason"), "token-unknown-kid");
  }
  EXPECT_LE(idp.requests().size(), fetched + 1);
  EXPECT_EQ(sluice->stop(), 0);

  // A key the IdP adds later is picked up by a token that names it (its
  // unknown kid fetches again; the refresh interval is 5 minutes).
  TempFile fast(config("10ms"));
  auto s2 = start_sluice(fast);
  HttpClient c2(kHost, s2->port());
  EXPECT_TRUE(eventually([&] {
    return c2.post_json("/v1/completions", completion_body(1),
                        {{"Authorization", "Bearer " + make_token(first, claims("acme"))}})
               .status == 200;
  }));
  {
    std::lock_guard lock(mu);
    served = jwks_of(std::vector<const SigningKey*>{&first, &second});
  }
  EXPECT_TRUE(eventually([&] {
    return c2.post_json("/v1/completions", completion_body(1),
                        {{"Authorization", "Bearer " + make_token(second, claims("acme"))}})
               .status == 200;
  }));
}

}  // namespace
}  // namespace sluice::test
