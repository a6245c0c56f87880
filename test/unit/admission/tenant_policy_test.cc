// admission's tenant step without a socket or a thread: the decision, the
// body rewrite read back by the protocol parser, and the flow settled. The
// expected numbers are worked out by hand from the config of each test.
#include "admission/tenant_policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace sluice::admission {
namespace {

constexpr const char* kConfig = R"(
objectives:
  - {name: critical, priority: 20}
  - {name: interactive, priority: 10}
  - {name: standard, priority: 0}
  - {name: batch, priority: -10}
tenants:
  - {id: acme, models: [llama-3-8b, 'qwen/*'], maxObjective: interactive, maxTokens: 100,
     maxConcurrency: 3, subflows: [ui]}
  - {id: strict, maxObjective: standard, aboveMaxObjective: refuse, maxTokens: 100,
     aboveMaxTokens: refuse}
  - {id: open}
)";

struct Fixture {
  Fixture() : config(config::load_config_string(kConfig)), tenants(config) {}
  // An authenticated request of `tenant` (its policy, if it has one).
  void as_tenant(std::string_view tenant) {
    identity.clear();
    identity.source = auth::Source::kApiKey;
    identity.tenant = tenant;
    identity.policy = tenants.find(tenant);
  }
  // A body, parsed as the exchange parses it.
  void with_body(std::string body_json) {
    head.body = std::move(body_json);
    parsed = protocol::parse_openai_request(head.body).request;
  }
  Verdict check(protocol::Route route = protocol::Route::kChatCompletions) {
    Request r(head, identity, route, &parsed);
    decision = TenantDecision{};
    return check_tenant_policy(tenants, r, decision);
  }
  void settle() {
    Request r(head, identity, protocol::Route::kChatCompletions, &parsed);
    settle_tenant_flow(r, decision);
  }
  // The body as sent on, read back: each output-token limit's largest value
  // (-1: absent).
  std::int64_t limit_sent(std::size_t key) {
    std::string copy = head.body;
    const protocol::OutputLimit l = protocol::parse_openai_request(copy).request.output_limits[key];
    return l.present ? l.max : -1;
  }
  config::Config config;
  auth::Tenants tenants;
  protocol::RequestHead head;
  auth::Identity identity;
  protocol::OpenAIRequest parsed;
  TenantDecision decision;
};

constexpr std::size_t kMaxTokens = 0, kMaxCompletionTokens = 1, kMaxOutputTokens = 2;

std::string message_of(const flowcontrol::ErrorAnswer& a) {
  return nlohmann::json::parse(a.body)["error"]["message"].get<std::string>();
}

TEST(AdmissionTenantPolicy, ARequestUnderNoPolicyGoesOnUntouched) {
  Fixture f;
  f.head.objective = "critical";
  f.head.fairness_id = "team-a";
  f.with_body(R"({"model":"anything","max_tokens":5000,"messages":[]})");
  const std::string sent = f.head.body;
  EXPECT_TRUE(f.check().admitted());
  EXPECT_FALSE(f.decision.applies);
  f.settle();
  EXPECT_EQ(f.head.objective, "critical");
  EXPECT_EQ(f.head.fairness_id, "team-a");
  EXPECT_EQ(f.head.body, sent);
  EXPECT_EQ(f.parsed.max_tokens.value_or(-1), 5000);
}

TEST(AdmissionTenantPolicy, AModelOutsideTheTenantsListIs403) {
  Fixture f;
  f.as_tenant("acme");
  f.with_body(R"({"model":"mistral-7b","messages":[]})");
  const Verdict v = f.check();
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().status, 403);
  EXPECT_EQ(v.answer().code, "model_not_allowed");
  EXPECT_EQ(v.answer().reason, "model-not-allowed");
  EXPECT_EQ(message_of(v.answer()), "tenant 'acme' may not use model 'mistral-7b'");
  // An exact name and a prefix of the list.
  f.with_body(R"({"model":"llama-3-8b","max_tokens":10,"messages":[]})");
  EXPECT_TRUE(f.check().admitted());
  f.with_body(R"({"model":"qwen/qwen2-7b","max_tokens":10,"messages":[]})");
  EXPECT_TRUE(f.check().admitted());
}

TEST(AdmissionTenantPolicy, TheObjectiveIsClampedToTheCeilingOrRefused) {
  Fixture f;
  f.as_tenant("acme");
  f.with_body(R"({"model":"llama-3-8b","max_tokens":10,"messages":[]})");
  f.head.objective = "critical";  // 20, above interactive's 10
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.decision.objective, "interactive");
  // The token's objective is asked for before the header's.
  f.identity.objective = "batch";
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.decision.objective, "batch");
  f.as_tenant("strict");
  f.head.objective = "interactive";  // 10, above standard's 0
  const Verdict v = f.check();
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().status, 403);
  EXPECT_EQ(v.answer().reason, "objective-not-allowed");
  EXPECT_EQ(message_of(v.answer()), "tenant 'strict' may not use objective 'interactive'");
}

TEST(AdmissionTenantPolicy, ClampRewritesEachLimitAboveTheCeilingAndKeepsTheOthers) {
  Fixture f;
  f.as_tenant("acme");  // maxTokens 100
  f.with_body(
      R"({"model":"llama-3-8b","max_tokens":500,"max_completion_tokens":50,"messages":[]})");
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.limit_sent(kMaxTokens), 100);           // 500 > 100: the ceiling
  EXPECT_EQ(f.limit_sent(kMaxCompletionTokens), 50);  // under it: kept
  EXPECT_EQ(f.limit_sent(kMaxOutputTokens), -1);      // absent: not added
  EXPECT_EQ(f.parsed.max_tokens.value_or(-1), 100);   // min(500, 100) sizes the request
}

TEST(AdmissionTenantPolicy, ABodyWithoutALimitGetsTheCeilingInItsRoutesMember) {
  Fixture f;
  f.as_tenant("acme");
  f.with_body(R"({"model":"llama-3-8b","messages":[]})");
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.limit_sent(kMaxTokens), 100);
  EXPECT_EQ(f.limit_sent(kMaxOutputTokens), -1);
  EXPECT_EQ(f.parsed.max_tokens.value_or(-1), 100);
  // /v1/responses: vLLM reads max_output_tokens there.
  f.with_body(R"({"model":"llama-3-8b","input":"hi"})");
  ASSERT_TRUE(f.check(protocol::Route::kResponses).admitted());
  EXPECT_EQ(f.limit_sent(kMaxOutputTokens), 100);
  EXPECT_EQ(f.limit_sent(kMaxTokens), -1);
  // A null limit (the engine's "no limit") is written as the ceiling, and
  // the route's member too, since no limit carried a number.
  f.with_body(R"({"model":"llama-3-8b","max_completion_tokens":null,"messages":[]})");
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.limit_sent(kMaxCompletionTokens), 100);
  EXPECT_EQ(f.limit_sent(kMaxTokens), 100);
}

TEST(AdmissionTenantPolicy, RefuseAboveTheCeilingIs400NamingTheMember) {
  Fixture f;
  f.as_tenant("strict");  // maxTokens 100, aboveMaxTokens: refuse
  f.with_body(R"({"model":"m","max_tokens":10,"max_completion_tokens":101,"messages":[]})");
  const std::string sent = f.head.body;
  const Verdict v = f.check();
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().status, 400);
  EXPECT_EQ(v.answer().code, "max_tokens_exceeded");
  EXPECT_EQ(v.answer().reason, "max-tokens-exceeded");
  EXPECT_EQ(message_of(v.answer()),
            "max_completion_tokens 101 is above the tenant's ceiling of 100");
  EXPECT_EQ(f.head.body, sent);
  // At the ceiling: nothing to refuse, nothing to rewrite.
  f.with_body(R"({"model":"m","max_tokens":100,"messages":[]})");
  const std::string at = f.head.body;
  EXPECT_TRUE(f.check().admitted());
  EXPECT_EQ(f.head.body, at);
}

TEST(AdmissionTenantPolicy, EmbeddingsHaveNoCeiling) {
  Fixture f;
  f.as_tenant("acme");
  f.with_body(R"({"model":"llama-3-8b","input":"hi"})");
  const std::string sent = f.head.body;
  EXPECT_TRUE(f.check(protocol::Route::kEmbeddings).admitted());
  EXPECT_EQ(f.head.body, sent);
}

TEST(AdmissionTenantPolicy, TheConcurrencyLimitIsTheCallersToHold) {
  Fixture f;
  f.with_body(R"({"model":"llama-3-8b","max_tokens":10,"messages":[]})");
  f.as_tenant("acme");
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.decision.max_concurrency, 3u);
  f.as_tenant("open");
  ASSERT_TRUE(f.check().admitted());
  EXPECT_EQ(f.decision.max_concurrency, 0u);
  const flowcontrol::ErrorAnswer a = tenant_concurrency_refused("acme", 3);
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.code, "tenant_concurrency_limit");
  EXPECT_EQ(a.reason, "tenant-concurrency-limit");
  EXPECT_EQ(a.retry_after_seconds, 1);
  EXPECT_EQ(message_of(a),
            "tenant 'acme' has 3 requests in flight already, its limit; retry when one ends");
}

TEST(AdmissionTenantPolicy, TheFlowIsTheTenantsOwnOrASubflowItMayChoose) {
  Fixture f;
  f.with_body(R"({"model":"llama-3-8b","max_tokens":10,"messages":[]})");
  f.as_tenant("acme");
  f.head.objective = "critical";
  f.head.fairness_id = "ui";
  ASSERT_TRUE(f.check().admitted());
  f.settle();
  EXPECT_EQ(f.head.fairness_id, "acme/ui");
  EXPECT_EQ(f.head.objective, "interactive");
  f.head.fairness_id = "jobs";  // not one of its sub-flows
  ASSERT_TRUE(f.check().admitted());
  f.settle();
  EXPECT_EQ(f.head.fairness_id, "acme");
  // A trusted proxy names tenant and sub-flow in one id.
  f.as_tenant("acme");
  f.identity.source = auth::Source::kTrustedProxy;
  f.head.fairness_id = "acme/ui";
  ASSERT_TRUE(f.check().admitted());
  f.settle();
  EXPECT_EQ(f.head.fairness_id, "acme/ui");
  // An authenticated tenant without a policy: its own flow, its objective
  // as asked.
  f.as_tenant("nobody");
  f.head.fairness_id = "ui";
  f.head.objective = "critical";
  ASSERT_TRUE(f.check().admitted());
  f.settle();
  EXPECT_EQ(f.head.fairness_id, "nobody");
  EXPECT_EQ(f.head.objective, "critical");
}

TEST(AdmissionTenantPolicy, APassthroughRequestOfATenantLimitedByModelOrMaxTokensIs403) {
  Fixture f;
  f.head.target = "/v1/rerank";
  f.head.body = R"({"anything":1})";
  f.parsed = protocol::OpenAIRequest{};
  f.as_tenant("acme");
  const Verdict v = f.check(protocol::Route::kPassthrough);
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().status, 403);
  EXPECT_EQ(v.answer().reason, "passthrough-not-allowed");
  EXPECT_EQ(message_of(v.answer()),
            "tenant 'acme' is limited by model or max_tokens, which an unparsed request cannot "
            "be held to; use an OpenAI path (/v1/rerank is not one)");
  f.as_tenant("open");
  EXPECT_TRUE(f.check(protocol::Route::kPassthrough).admitted());
  EXPECT_EQ(f.head.body, R"({"anything":1})");
}

}  // namespace
}  // namespace sluice::admission
