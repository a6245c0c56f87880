// admission::identify without a socket or a thread: the request's head and
// the config as values, the wall clock a number the test moves.
#include "admission/identity.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "auth/api_keys.h"
#include "config/config.h"

namespace sluice::admission {
namespace {

struct Fixture {
  explicit Fixture(const std::string& yaml, std::vector<auth::KeyRecord> keys = {})
      : config(config::load_config_string(yaml)),
        authenticator(config,
                      keys.empty() ? nullptr : std::make_shared<auth::KeyStore>(std::move(keys))) {}
  IdentityOutcome identify_with(IdentityContext c) {
    Request r{head, identity};
    return identify(c, r);
  }
  IdentityContext context() {
    IdentityContext c{authenticator};
    c.max_fairness_id_bytes = 64;
    return c;
  }
  config::Config config;
  auth::Authenticator authenticator;
  protocol::RequestHead head;
  auth::Identity identity;
};

std::string error_message(const flowcontrol::ErrorAnswer& a) {
  return nlohmann::json::parse(a.body)["error"]["message"].get<std::string>();
}

TEST(AdmissionIdentity, WithoutAuthTheSteeringHeadersStand) {
  Fixture f("");
  f.head.fairness_id = "team-a";
  f.head.objective = "batch";
  const IdentityOutcome out = f.identify_with(f.context());
  EXPECT_TRUE(out.verdict.admitted());
  EXPECT_EQ(out.auth_result, "");  // nothing was checked, nothing is counted
  EXPECT_FALSE(out.jwks_refetch);
  EXPECT_EQ(f.identity.source, auth::Source::kNone);
  EXPECT_EQ(f.identity.tenant, "");
  EXPECT_FALSE(under_tenant_policy(f.identity));
  EXPECT_EQ(f.head.fairness_id, "team-a");
  EXPECT_EQ(f.head.objective, "batch");
}

TEST(AdmissionIdentity, AnAgentSessionHeaderNamesTheFlowOfARequestThatNamesNone) {
  Fixture f("");
  const std::vector<std::string> headers{"x-agent-session", "x-session-id"};
  IdentityContext c = f.context();
  c.agent_session_headers = headers;
  // The first header present, matched without regard to case, trimmed.
  f.head.forward_headers = "Host: gw\r\nX-Session-ID:  s-42 \r\n";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.head.fairness_id, "s-42");
  // A flow the request names itself stays.
  f.head.fairness_id = "mine";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.head.fairness_id, "mine");
  // A value that is not a fairness id is ignored, not refused.
  f.head.fairness_id.clear();
  f.head.forward_headers = "X-Agent-Session: not one\r\nX-Session-ID: s-43\r\n";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.head.fairness_id, "");
}

TEST(AdmissionIdentity, TrustedProxiesAloneStripAnotherPeersSteeringHeaders) {
  Fixture f("auth: {trustedProxies: [10.0.0.0/8]}\n");
  f.head.fairness_id = "team-a";
  f.head.objective = "critical";
  IdentityContext c = f.context();
  c.peer_trusted = false;
  const IdentityOutcome out = f.identify_with(c);
  EXPECT_TRUE(out.verdict.admitted());
  EXPECT_EQ(out.auth_result, "");
  EXPECT_EQ(f.head.fairness_id, "");
  EXPECT_EQ(f.head.objective, "");
}

TEST(AdmissionIdentity, ATrustedProxysFairnessIdNamesTheTenantWhosePolicyHolds) {
  Fixture f(R"(auth: {trustedProxies: [10.0.0.0/8]}
tenants: [{id: acme, maxConcurrency: 2, subflows: [ui]}]
)");
  const std::vector<std::string> headers{"x-session-id"};
  IdentityContext c = f.context();
  c.peer_trusted = true;
  c.agent_session_headers = headers;
  f.head.fairness_id = "acme/ui";
  f.head.objective = "critical";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.identity.source, auth::Source::kTrustedProxy);
  EXPECT_EQ(f.identity.tenant, "acme");
  EXPECT_EQ(f.identity.policy, f.authenticator.tenants().find("acme"));
  EXPECT_FALSE(authenticated(f.identity));  // its Authorization goes on
  EXPECT_TRUE(under_tenant_policy(f.identity));
  EXPECT_EQ(f.head.fairness_id, "acme/ui");  // the tenant step makes it the flow
  EXPECT_EQ(f.head.objective, "critical");
  // A tenant without a policy: nobody's, its fairness id stands as sent.
  f.head.fairness_id = "other";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.identity.tenant, "");
  EXPECT_EQ(f.identity.policy, nullptr);
  EXPECT_FALSE(under_tenant_policy(f.identity));
  EXPECT_EQ(f.head.fairness_id, "other");
  // Without a fairness id a session header may name the flow, but never a
  // tenant's.
  f.head.fairness_id.clear();
  f.head.forward_headers = "x-session-id: acme\r\n";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.head.fairness_id, "");
  f.head.forward_headers = "x-session-id: s-7\r\n";
  ASSERT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.head.fairness_id, "s-7");
}

auth::NewKey key_of(std::string_view tenant, std::string_view id) {
  auto k = auth::generate_key(tenant, id);
  EXPECT_TRUE(k.has_value());
  return *k;
}

TEST(AdmissionIdentity, AKeyNamesItsTenantAndIsCounted) {
  const auth::NewKey k = key_of("acme", "key_a");
  Fixture f("auth: {apiKeys: {file: /nonexistent}}\ntenants: [{id: acme, maxConcurrency: 2}]\n",
            {k.record});
  f.head.authorization = "Bearer " + k.key;
  f.head.authorization_count = 1;
  f.head.fairness_id = "ui";
  const IdentityOutcome out = f.identify_with(f.context());
  EXPECT_TRUE(out.verdict.admitted());
  EXPECT_EQ(out.auth_result, "ok");
  EXPECT_EQ(f.identity.source, auth::Source::kApiKey);
  EXPECT_EQ(f.identity.tenant, "acme");
  EXPECT_EQ(f.identity.key_id, "key_a");
  EXPECT_TRUE(authenticated(f.identity));  // its Authorization is not forwarded
  EXPECT_TRUE(under_tenant_policy(f.identity));
  EXPECT_EQ(f.head.fairness_id, "ui");  // a sub-flow it may ask for (tenant step)
}

TEST(AdmissionIdentity, NoKeyIs401WithOpenAIsCodeAndTheRealm) {
  Fixture f("auth: {apiKeys: {file: /nonexistent}, realm: gw}\n");
  IdentityOutcome out = f.identify_with(f.context());
  ASSERT_FALSE(out.verdict.admitted());
  const flowcontrol::ErrorAnswer& a = out.verdict.answer();
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.code, "invalid_api_key");
  EXPECT_EQ(a.reason, "missing-credentials");
  EXPECT_EQ(out.auth_result, "missing-credentials");
  EXPECT_EQ(a.www_authenticate, "Bearer realm=\"gw\"");
  EXPECT_EQ(error_message(a),
            "You didn't provide an API key. Send it as Authorization: Bearer KEY.");
  EXPECT_TRUE(a.close_connection);  // the body was not read
  IdentityContext c = f.context();
  c.body_read = true;
  out = f.identify_with(c);
  ASSERT_FALSE(out.verdict.admitted());
  EXPECT_FALSE(out.verdict.answer().close_connection);
}

TEST(AdmissionIdentity, AnUnknownKeyIs401InvalidToken) {
  Fixture f("auth: {apiKeys: {file: /nonexistent}}\n");
  f.head.authorization = "Bearer sk-sluice-nope";
  f.head.authorization_count = 1;
  const IdentityOutcome out = f.identify_with(f.context());
  ASSERT_FALSE(out.verdict.admitted());
  const flowcontrol::ErrorAnswer& a = out.verdict.answer();
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.reason, "unknown-key");
  EXPECT_EQ(a.www_authenticate, "Bearer realm=\"sluice\", error=\"invalid_token\"");
  EXPECT_EQ(error_message(a), "Incorrect API key provided.");
  EXPECT_FALSE(out.jwks_refetch);
  EXPECT_EQ(f.identity.tenant, "");
  EXPECT_FALSE(under_tenant_policy(f.identity));
}

TEST(AdmissionIdentity, ARepeatedAuthorizationHeaderIs400) {
  const auth::NewKey k = key_of("acme", "key_a");
  Fixture f("auth: {apiKeys: {file: /nonexistent}}\n", {k.record});
  f.head.authorization = "Bearer " + k.key;
  f.head.authorization_count = 2;
  const IdentityOutcome out = f.identify_with(f.context());
  ASSERT_FALSE(out.verdict.admitted());
  const flowcontrol::ErrorAnswer& a = out.verdict.answer();
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.code, "repeated_authorization_header");
  EXPECT_EQ(a.reason, "repeated-authorization-header");
  EXPECT_EQ(a.www_authenticate, "");
  EXPECT_EQ(f.identity.tenant, "");
}

// Time is the caller's value: the key's expiry is crossed by moving it.
TEST(AdmissionIdentity, AKeyExpiresAtItsSecondOnTheCallersClock) {
  auth::NewKey k = key_of("acme", "key_a");
  k.record.expires_at = 1000;
  Fixture f("auth: {apiKeys: {file: /nonexistent}}\n", {k.record});
  f.head.authorization = "Bearer " + k.key;
  f.head.authorization_count = 1;
  IdentityContext c = f.context();
  c.now_unix = 999;
  EXPECT_TRUE(f.identify_with(c).verdict.admitted());
  EXPECT_EQ(f.identity.tenant, "acme");
  c.now_unix = 1000;
  const IdentityOutcome out = f.identify_with(c);
  ASSERT_FALSE(out.verdict.admitted());
  EXPECT_EQ(out.verdict.answer().reason, "key-expired");
  EXPECT_EQ(f.identity.tenant, "");  // cleared: the earlier request's is not kept
}

TEST(AdmissionIdentity, AJwtBeforeAnyJwksIsLoadedAsksForItAgain) {
  Fixture f("auth: {jwt: {jwksFile: /nonexistent}}\n");
  f.head.authorization = "Bearer aaaa.bbbb.cccc";
  f.head.authorization_count = 1;
  const IdentityOutcome out = f.identify_with(f.context());
  ASSERT_FALSE(out.verdict.admitted());
  EXPECT_EQ(out.verdict.answer().status, 401);
  EXPECT_EQ(out.verdict.answer().reason, "token-unknown-kid");
  EXPECT_EQ(out.auth_result, "token-unknown-kid");
  EXPECT_TRUE(out.jwks_refetch);
}

}  // namespace
}  // namespace sluice::admission
