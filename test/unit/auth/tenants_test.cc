#include "auth/tenants.h"

#include <gtest/gtest.h>

#include "auth/authenticator.h"

namespace sluice::auth {
namespace {

config::Config config_of(const std::string& tenants) {
  return config::load_config_string(R"(
objectives:
  - {name: critical, priority: 20}
  - {name: interactive, priority: 10}
  - {name: standard, priority: 0}
  - {name: batch, priority: -10}
)" + tenants);
}

TEST(Tenants, ObjectiveCeilingClampsOrRefuses) {
  auto c = config_of(R"(
tenants:
  - {id: clamp, maxObjective: standard}
  - {id: refuse, maxObjective: standard, aboveMaxObjective: refuse, defaultObjective: batch}
)");
  Tenants t(c);
  const auto* clamp = t.find("clamp");
  ASSERT_NE(clamp, nullptr);
  auto d = t.decide_objective(*clamp, "critical");
  EXPECT_FALSE(d.refused);
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.objective, "standard");
  d = t.decide_objective(*clamp, "batch");
  EXPECT_FALSE(d.clamped);
  EXPECT_EQ(d.objective, "batch");
  d = t.decide_objective(*clamp, "");
  EXPECT_EQ(d.objective, "");  // priority 0, at the ceiling
  const auto* refuse = t.find("refuse");
  d = t.decide_objective(*refuse, "interactive");
  EXPECT_TRUE(d.refused);
  d = t.decide_objective(*refuse, "");
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.objective, "batch");
  // An objective nobody configured is priority 0, as in GIE.
  d = t.decide_objective(*refuse, "made-up");
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.objective, "made-up");
}

TEST(Tenants, AllowedListClampsToTheHighestAtOrBelow) {
  auto c = config_of(R"(
tenants:
  - {id: a, objectives: [standard, batch]}
  - {id: b, objectives: [interactive], aboveMaxObjective: refuse}
  - {id: c, objectives: [interactive, standard], maxObjective: standard}
)");
  Tenants t(c);
  auto d = t.decide_objective(*t.find("a"), "critical");
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.objective, "standard");
  d = t.decide_objective(*t.find("a"), "made-up");  // priority 0: standard
  EXPECT_EQ(d.objective, "standard");
  d = t.decide_objective(*t.find("a"), "");
  EXPECT_EQ(d.objective, "standard");
  d = t.decide_objective(*t.find("b"), "batch");
  EXPECT_TRUE(d.refused);
  d = t.decide_objective(*t.find("b"), "");  // nothing named: its lowest allowed
  EXPECT_FALSE(d.refused);
  EXPECT_EQ(d.objective, "interactive");
  d = t.decide_objective(*t.find("c"), "interactive");  // listed, but over the ceiling
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.objective, "standard");
}

TEST(Tenants, ModelsExactAndPrefix) {
  auto c = config_of("tenants: [{id: a, models: [llama-3-8b, 'qwen/*']}, {id: b}]");
  Tenants t(c);
  const auto& a = *t.find("a");
  EXPECT_TRUE(Tenants::model_allowed(a, "llama-3-8b"));
  EXPECT_FALSE(Tenants::model_allowed(a, "llama-3-8b-instruct"));
  EXPECT_TRUE(Tenants::model_allowed(a, "qwen/2.5-7b"));
  EXPECT_FALSE(Tenants::model_allowed(a, "qwen"));
  EXPECT_FALSE(Tenants::model_allowed(a, "mistral"));
  EXPECT_TRUE(Tenants::model_allowed(*t.find("b"), "anything"));
  EXPECT_EQ(t.find("nobody"), nullptr);
}

TEST(Tenants, DefaultPolicyAndSubflows) {
  auto c = config_of(R"(
tenants:
  - {id: a, subflows: [ui, jobs]}
  - {id: b, subflows: ['*']}
  - {id: '*', maxConcurrency: 3}
)");
  Tenants t(c);
  ASSERT_NE(t.find("zed"), nullptr);
  EXPECT_EQ(t.find("zed")->max_concurrency, 3u);
  EXPECT_EQ(Tenants::flow_for(t.find("a"), "a", "ui"), "a/ui");
  EXPECT_EQ(Tenants::flow_for(t.find("a"), "a", "other"), "a");
  EXPECT_EQ(Tenants::flow_for(t.find("a"), "a", ""), "a");
  // Another tenant's flow cannot be named: the result is always under "a".
  EXPECT_EQ(Tenants::flow_for(t.find("b"), "b", "a"), "b/a");
  // A sub-flow is one name: "b/x" (a full flow id sent as the sub-flow)
  // names none, even under '*'.
  EXPECT_EQ(Tenants::flow_for(t.find("b"), "b", "b/x"), "b");
  EXPECT_EQ(Tenants::flow_for(t.find("a"), "a", "a/ui"), "a");
  EXPECT_EQ(Tenants::flow_for(t.find("zed"), "zed", "ui"), "zed");
  EXPECT_EQ(Tenants::flow_for(nullptr, "q", "ui"), "q");
}

TEST(Authenticator, BearerParsing) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("BEARER abc"), "abc");
  for (const char* bad :
       {"", "Bearer", "Bearer ", "Basic abc", "Bearerabc", "Bearer a b", "Bearer a,b", "Token abc"})
    EXPECT_EQ(bearer_token(bad), "") << bad;
}

TEST(Authenticator, KeysAndTheirFailures) {
  auto c = config_of(R"(
auth: {apiKeys: {file: /nonexistent}, trustedProxies: [10.0.0.0/8]}
tenants: [{id: acme, maxConcurrency: 2}]
)");
  auto good = generate_key("acme", "key_good");
  auto old = generate_key("acme", "key_old");
  auto off = generate_key("acme", "key_off");
  old->record.expires_at = 100;
  off->record.disabled = true;
  auto store =
      std::make_shared<KeyStore>(std::vector<KeyRecord>{good->record, old->record, off->record});
  Authenticator a(c, store);
  EXPECT_TRUE(a.enabled());
  EXPECT_FALSE(a.headers_trusted_by_default());
  Identity id;
  const std::string auth = "Bearer " + good->key;
  auto r = a.authenticate({auth, 1, {}}, 200, id);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(id.source, Source::kApiKey);
  EXPECT_EQ(id.tenant, "acme");
  EXPECT_EQ(id.key_id, "key_good");
  ASSERT_NE(id.policy, nullptr);
  EXPECT_EQ(id.policy->max_concurrency, 2u);
  struct Case {
    std::string header;
    int count;
    AuthFailure failure;
    std::string_view reason;
  };
  const Case cases[] = {
      {"", 0, AuthFailure::kMissing, "missing-credentials"},
      {auth, 2, AuthFailure::kRepeated, "repeated-authorization-header"},
      {"Basic " + good->key, 1, AuthFailure::kMalformed, "malformed-credentials"},
      {"Bearer sk-sluice-nope", 1, AuthFailure::kUnknownKey, "unknown-key"},
      {"Bearer " + old->key, 1, AuthFailure::kExpiredKey, "key-expired"},
      {"Bearer " + off->key, 1, AuthFailure::kDisabledKey, "key-disabled"},
  };
  for (const auto& k : cases) {
    r = a.authenticate({k.header, k.count, {}}, 200, id);
    EXPECT_EQ(r.failure, k.failure) << k.header;
    EXPECT_EQ(r.reason, k.reason) << k.header;
    EXPECT_TRUE(id.tenant.empty());
  }
  // A refused key is still named by its id in the log.
  a.authenticate({"Bearer " + old->key, 1, {}}, 200, id);
  EXPECT_EQ(id.key_id, "key_old");
  auto peer = [](const char* s) { return config::parse_cidr(s)->address; };
  EXPECT_TRUE(a.trusted(peer("10.9.8.7")));
  EXPECT_FALSE(a.trusted(peer("127.0.0.1")));
}

// A scoped key narrows its tenant's policy and never widens it: models in
// both lists, the lower objective ceiling, the lower max_tokens.
TEST(Authenticator, AScopedKeyNarrowsItsTenantsPolicyAndNeverWidensIt) {
  auto c = config_of(R"(
auth: {apiKeys: {file: /nonexistent}}
tenants:
  - {id: acme, models: ['llama-*', qwen], maxObjective: interactive, maxTokens: 1000,
     maxConcurrency: 4}
)");
  auto plain = generate_key("acme", "key_plain");
  auto narrow = generate_key("acme", "key_narrow");
  narrow->record.models = {"llama-3-*", "mistral"};
  narrow->record.max_objective = "batch";
  narrow->record.max_tokens = 200;
  auto wide = generate_key("acme", "key_wide");
  wide->record.max_objective = "critical";  // above the tenant's: no effect
  wide->record.max_tokens = 5000;
  auto odd = generate_key("nobody", "key_odd");  // a tenant without a policy
  odd->record.max_objective = "no-such-objective";
  auto store = std::make_shared<KeyStore>(
      std::vector<KeyRecord>{plain->record, narrow->record, wide->record, odd->record});
  Authenticator a(c, store);
  auto policy_of = [&](const NewKey& k) {
    Identity id;
    EXPECT_TRUE(a.authenticate({"Bearer " + k.key, 1, {}}, 200, id).ok());
    EXPECT_EQ(id.tenant, k.record.tenant);
    return id.policy;
  };
  const TenantPolicy* p = policy_of(*plain);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, a.tenants().find("acme"));  // unscoped: the tenant's own

  p = policy_of(*narrow);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->restricts_models());
  EXPECT_TRUE(Tenants::model_allowed(*p, "llama-3-8b"));
  EXPECT_FALSE(Tenants::model_allowed(*p, "llama-2-7b"));  // the key's list
  EXPECT_FALSE(Tenants::model_allowed(*p, "mistral"));     // the tenant's list
  EXPECT_FALSE(Tenants::model_allowed(*p, "qwen"));        // the key's list
  EXPECT_EQ(p->max_tokens, 200u);
  EXPECT_EQ(p->max_concurrency, 4u);
  EXPECT_EQ(p->id, "acme");  // concurrency is still counted per tenant
  auto d = a.tenants().decide_objective(*p, "interactive");
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.objective, "batch");

  p = policy_of(*wide);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->max_tokens, 1000u);
  EXPECT_EQ(p->max_objective, "interactive");
  EXPECT_TRUE(Tenants::model_allowed(*p, "qwen"));
  EXPECT_FALSE(Tenants::model_allowed(*p, "mistral"));
  d = a.tenants().decide_objective(*p, "critical");
  EXPECT_EQ(d.objective, "interactive");

  // No tenant policy: the key's scope alone; an objective that is not
  // configured narrows to priority 0.
  p = policy_of(*odd);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->restricts_models());
  d = a.tenants().decide_objective(*p, "critical");
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.objective, "standard");
}

// Issue 39, item 2: a certificate's name is a tenant only as the config
// maps it; it is never cut down to one, so names that end alike do not
// collide.
TEST(Authenticator, ClientCertificateNamesMapToTenantsExplicitly) {
  auto c = config_of(R"(auth: {clientCertificateTenants: true}
tenants:
  - id: team-a
    certificateNames: [team-a, "spiffe://example.org/ns/prod/sa/team-a"]
  - id: beta
    certificateNames: ["spiffe://cluster/ns/beta/sa/*"]
)");
  Authenticator a(c, nullptr);
  Identity id;
  EXPECT_TRUE(a.authenticate({{}, 0, "team-a"}, 0, id).ok());
  EXPECT_EQ(id.source, Source::kClientCertificate);
  EXPECT_EQ(id.tenant, "team-a");
  EXPECT_TRUE(a.authenticate({{}, 0, "spiffe://example.org/ns/prod/sa/team-a"}, 0, id).ok());
  EXPECT_EQ(id.tenant, "team-a");
  // Any service account of namespace beta in trust domain cluster.
  EXPECT_TRUE(a.authenticate({{}, 0, "spiffe://cluster/ns/beta/sa/default"}, 0, id).ok());
  EXPECT_EQ(id.tenant, "beta");
  // Names that merely end like a tenant, or reach past the pattern's one
  // segment, are nobody.
  for (const char* other :
       {"spiffe://cluster/ns/dev/sa/beta", "spiffe://evil/ns/prod/sa/team-a",
        "spiffe://example.org/ns/dev/sa/team-a", "spiffe://cluster/ns/beta/sa/x/y",
        "spiffe://cluster/ns/beta/sa/", "spiffe://cluster/ns/beta/sa/..", "beta", "team a",
        "spiffe://cluster/ns/beta/sa/a?b", "spiffe://example.org/"}) {
    SCOPED_TRACE(other);
    id.clear();
    EXPECT_EQ(a.authenticate({{}, 0, other}, 0, id).reason, "certificate-name-not-a-tenant");
    EXPECT_EQ(id.source, Source::kNone);
  }
  // A key, when sent, is what counts.
  EXPECT_EQ(a.authenticate({"Bearer sk-sluice-x", 1, "team-a"}, 0, id).reason, "unknown-key");
  Authenticator off(config_of(""), nullptr);
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.headers_trusted_by_default());
}

}  // namespace
}  // namespace sluice::auth
