#include <gtest/gtest.h>

#include "config/config.h"
#include "config/units.h"
#include "unit/config_errors.h"

namespace sluice::config {
namespace {

constexpr auto* error_of = &unit::load_error;

constexpr const char* kObjectives = R"(
objectives:
  - {name: interactive, priority: 10}
  - {name: standard, priority: 0}
  - {name: batch, priority: -10}
)";

TEST(AuthConfig, Defaults) {
  auto c = load_config_string("");
  EXPECT_FALSE(c.auth.enabled);
  EXPECT_TRUE(c.tenants.empty());
  EXPECT_EQ(c.auth.jwt.algorithms, (std::vector<std::string>{"RS256", "ES256", "EdDSA"}));
}

TEST(AuthConfig, FullSections) {
  auto c = load_config_string(std::string(kObjectives) + R"(
auth:
  apiKeys: {file: /etc/sluice/keys.yaml, pollInterval: 2s}
  jwt:
    jwksUrl: https://idp.example/jwks.json
    issuer: https://idp.example/
    audiences: [sluice]
    algorithms: [ES256]
    leeway: 30s
    tenantClaim: org
    objectiveClaim: tier
    modelsClaim: models
    maxTokensClaim: max_tokens
  trustedProxies: [10.0.0.0/8, "::1", 127.0.0.1]
tenants:
  - id: acme
    objectives: [standard, batch]
    maxObjective: standard
    aboveMaxObjective: refuse
    defaultObjective: batch
    models: [llama-3-8b, "qwen/*"]
    maxTokens: 4096
    aboveMaxTokens: refuse
    maxConcurrency: 8
    weight: 2
    subflows: [ui, jobs]
  - id: "*"
    maxConcurrency: 2
)");
  EXPECT_TRUE(c.auth.enabled);
  EXPECT_EQ(c.auth.api_keys.file, "/etc/sluice/keys.yaml");
  EXPECT_EQ(c.auth.api_keys.poll_interval, std::chrono::seconds(2));
  EXPECT_TRUE(c.auth.jwt.enabled);
  EXPECT_EQ(c.auth.jwt.tenant_claim, "org");
  EXPECT_EQ(c.auth.jwt.models_claim, "models");
  EXPECT_EQ(c.auth.jwt.max_tokens_claim, "max_tokens");
  EXPECT_EQ(c.auth.jwt.algorithms, std::vector<std::string>{"ES256"});
  EXPECT_EQ(c.auth.trusted_proxies.size(), 3u);
  ASSERT_EQ(c.tenants.size(), 2u);
  const auto& t = c.tenants[0];
  EXPECT_EQ(t.max_objective, "standard");
  EXPECT_TRUE(t.refuse_above_max_objective);
  EXPECT_EQ(t.default_objective, "batch");
  EXPECT_EQ(t.models.size(), 2u);
  EXPECT_EQ(t.max_tokens, 4096u);
  EXPECT_TRUE(t.refuse_above_max_tokens);
  EXPECT_EQ(t.max_concurrency, 8u);
  EXPECT_EQ(t.subflows, (std::vector<std::string>{"ui", "jobs"}));
  // The tenant's weight is its flow's.
  ASSERT_EQ(c.flows.size(), 1u);
  EXPECT_EQ(c.flows[0].id, "acme");
  EXPECT_EQ(c.flows[0].weight, 2.0);
}

TEST(AuthConfig, ErrorsNameTheField) {
  const std::string o = kObjectives;
  EXPECT_NE(error_of("auth: {jwt: {issuer: x}}").find("auth.jwt: set exactly one of jwksFile"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {jwt: {jwksFile: a, algorithms: [HS256]}}")
                .find("auth.jwt.algorithms[0]: unsupported algorithm 'HS256'"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {jwt: {jwksFile: a, algorithms: [none]}}").find("unsupported"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {jwt: {jwksUrl: ftp://x}}").find("http:// or https://"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {trustedProxies: [10.0.0.1/8]}").find("auth.trustedProxies[0]"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {trustedProxies: [bogus]}").find("auth.trustedProxies[0]"),
            std::string::npos);
  EXPECT_NE(error_of(o + "tenants: [{id: a, maxObjective: nope}]")
                .find("tenants[0].maxObjective: no objective named 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a/b}]").find("tenants[0].id"), std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a}, {id: a}]").find("duplicate tenant 'a'"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, models: ['*']}]").find("tenants[0].models[0]"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, models: ['a*b']}]").find("tenants[0].models[0]"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, aboveMaxTokens: cut}]").find("expected clamp or refuse"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, weight: 0}]").find("tenants[0].weight"), std::string::npos);
  EXPECT_NE(error_of("flows: [{id: a, weight: 3}]\ntenants: [{id: a, weight: 2}]")
                .find("set it in one place"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, subflows: ['x y']}]").find("tenants[0].subflows[0]"),
            std::string::npos);
  EXPECT_NE(error_of("auth: {apiKeys: {file: k, extra: 1}}").find("auth.apiKeys.extra: unknown"),
            std::string::npos);
}

// Issue 39, item 2: certificate names are mapped, each to one tenant.
TEST(AuthConfig, CertificateNamesAreExplicitAndEachIsOneTenants) {
  auto c = load_config_string(R"(
auth: {clientCertificateTenants: true}
tenants:
  - {id: a, certificateNames: [client-a, "spiffe://td/ns/a/sa/*"]}
)");
  EXPECT_EQ(c.tenants[0].certificate_names,
            (std::vector<std::string>{"client-a", "spiffe://td/ns/a/sa/*"}));
  EXPECT_NE(error_of("auth: {clientCertificateTenants: true}")
                .find("auth.clientCertificateTenants: no tenant lists certificateNames"),
            std::string::npos);
  EXPECT_NE(error_of("tenants: [{id: a, certificateNames: [x]}, {id: b, certificateNames: [x]}]")
                .find("tenants[1].certificateNames[0]: 'x' names tenant 'a' already"),
            std::string::npos);
  for (const char* bad : {"'spiffe://td/ns/*/sa/x'", "'spiffe://td/ns/a/sa*'", "'*'", "'x/*'",
                          "'spiffe:///*'", "''"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(error_of(std::string("tenants: [{id: a, certificateNames: [") + bad + "]}]")
                  .find("tenants[0].certificateNames[0]"),
              std::string::npos);
  }
  EXPECT_NE(error_of("tenants: [{id: '*', certificateNames: [x]}]")
                .find("the default policy has no certificate names"),
            std::string::npos);
}

// Issue 39, item 9: the key writer's bound.
TEST(AuthConfig, MaxPendingKeyWrites) {
  EXPECT_EQ(load_config_string("").auth.api_keys.max_pending_writes, 64u);
  auto c = load_config_string("auth: {apiKeys: {file: k, maxPendingWrites: 3}}");
  EXPECT_EQ(c.auth.api_keys.max_pending_writes, 3u);
  for (const char* bad : {"0", "10001", "-1", "x"})
    EXPECT_NE(error_of(std::string("auth: {apiKeys: {file: k, maxPendingWrites: ") + bad + "}}")
                  .find("auth.apiKeys.maxPendingWrites"),
              std::string::npos)
        << bad;
}

TEST(Cidr, ParsesAndContains) {
  auto v4 = parse_cidr("10.1.0.0/16");
  ASSERT_TRUE(v4);
  auto mapped = [](const char* a) {
    auto c = parse_cidr(a);
    EXPECT_TRUE(c) << a;
    return c ? c->address : std::array<unsigned char, 16>{};
  };
  EXPECT_TRUE(cidr_contains(*v4, mapped("10.1.200.3")));
  EXPECT_FALSE(cidr_contains(*v4, mapped("10.2.0.1")));
  EXPECT_FALSE(cidr_contains(*v4, mapped("::1")));
  auto v6 = parse_cidr("fd00::/8");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(cidr_contains(*v6, mapped("fd12::1")));
  EXPECT_FALSE(cidr_contains(*v6, mapped("fe80::1")));
  auto one = parse_cidr("127.0.0.1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->prefix, 128);
  EXPECT_TRUE(cidr_contains(*one, mapped("127.0.0.1")));
  EXPECT_FALSE(cidr_contains(*one, mapped("127.0.0.2")));
  auto all = parse_cidr("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(cidr_contains(*all, mapped("8.8.8.8")));
  EXPECT_FALSE(cidr_contains(*all, mapped("2001:db8::1")));
  for (const char* bad : {"", "/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "::/129",
                          "10.0.0.1/8", "host.example", "10.0.0.0/0008"})
    EXPECT_FALSE(parse_cidr(bad)) << bad;
}

}  // namespace
}  // namespace sluice::config
