// admission's quota step without a socket or a thread: what a request
// reserves (the body parsed as the exchange parses it), the 429s OpenAI's
// SDKs read, and the x-ratelimit-* headers.
#include "admission/quota.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "auth/tenants.h"

namespace sluice::admission {
namespace {

struct Fixture {
  // A body, parsed as the exchange parses it.
  quota::Usage worst(std::string body_json, std::uint64_t tenant_max = 0,
                     std::uint64_t fallback = 4096) {
    head.body = std::move(body_json);
    parsed = protocol::parse_openai_request(head.body).request;
    policy.max_tokens = tenant_max;
    identity.clear();
    identity.source = auth::Source::kApiKey;
    identity.tenant = "acme";
    identity.policy = &policy;
    Request r(head, identity, protocol::Route::kChatCompletions, &parsed);
    return quota_worst_case(r, fallback);
  }
  protocol::RequestHead head;
  auth::Identity identity;
  protocol::OpenAIRequest parsed;
  auth::TenantPolicy policy;
};

TEST(QuotaStep, TheLargestOutputLimitIsReservedInEitherOrder) {
  Fixture f;
  const std::string prompt = R"("messages":[{"role":"user","content":"0123456789abcdef"}])";
  // The max_tokens bypass of LiteLLM #34223: a reservation from max_tokens
  // while the engine honours max_completion_tokens.
  auto a =
      f.worst(R"({"model":"m",)" + prompt + R"(,"max_tokens":10,"max_completion_tokens":100000})");
  auto b =
      f.worst(R"({"model":"m",)" + prompt + R"(,"max_completion_tokens":100000,"max_tokens":10})");
  EXPECT_EQ(a.output_tokens, 100000u);
  EXPECT_EQ(b.output_tokens, 100000u);
  EXPECT_GT(a.input_tokens, 0u);
  EXPECT_EQ(a.input_tokens, b.input_tokens);
  EXPECT_EQ(f.worst(R"({"model":"m","input":"x","max_output_tokens":77})").output_tokens, 77u);
}

// n and best_of ask for that many answers, each as long as the output
// limit: all are reserved (the largest of every occurrence of either).
TEST(QuotaStep, EveryAnswerAskedForIsReserved) {
  Fixture f;
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"x","max_tokens":100,"n":4})").output_tokens, 400u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"x","n":2,"max_tokens":100,"best_of":5,"n":1})")
                .output_tokens,
            500u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"x","max_tokens":100,"n":2.0})").output_tokens, 200u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"x","max_tokens":100,"n":null})").output_tokens, 100u);
  // Without max_tokens: the default, times n.
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"x","n":3})", 0, 10).output_tokens, 30u);
  // A batch of prompts: n answers for each.
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":["a","b","c"],"n":2,"max_tokens":10})").output_tokens,
            60u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":[[1,2],[3]],"max_tokens":10})").output_tokens, 20u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":[1,2,3],"max_tokens":10})").output_tokens, 10u);
}

// Input is reserved as the larger of the prompt's estimate and a quarter of
// the body's bytes: text the estimate does not read (tools, schemas) is
// input too, so a client cannot shrink its reservation by moving text
// there.
TEST(QuotaStep, InputIsAtLeastAQuarterOfTheBody) {
  Fixture f;
  const std::string tools(4000, 'x');
  const auto u =
      f.worst(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"d":")" +
              tools + R"("}]})");
  EXPECT_GE(u.input_tokens, 1000u);
}

TEST(QuotaStep, WithoutALimitTheTenantsMaxTokensElseTheDefaultIsReserved) {
  Fixture f;
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"hi"})", 300).output_tokens, 300u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"hi"})", 0, 512).output_tokens, 512u);
  EXPECT_EQ(f.worst(R"({"model":"m","prompt":"hi","max_tokens":0})", 300).output_tokens, 0u);
}

quota::Refusal refusal(quota::Measure m, quota::Period p, std::optional<quota::Millis> wait) {
  quota::Refusal r;
  r.owner = "tenant:acme";
  r.limit.name = "tpm";
  r.limit.measure = m;
  r.limit.amount = 100'000;
  r.limit.period = p;
  r.retry_after = wait;
  r.insufficient = m == quota::Measure::kCost || p.calendar != quota::Calendar::kNone;
  return r;
}

std::string header(const flowcontrol::ErrorAnswer& a, std::string_view name) {
  for (const auto& [n, v] : a.headers)
    if (n == name) return v;
  return "<absent>";
}

TEST(QuotaStep, ARateRefusalIsRateLimitExceededWithWhenToRetry) {
  auto a = quota_refused(refusal(quota::Measure::kTokens, {60'000}, 1'500));
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.code, "rate_limit_exceeded");
  EXPECT_EQ(a.retry_after_seconds, 2);  // rounded up
  EXPECT_EQ(header(a, "retry-after-ms"), "1500");
  EXPECT_EQ(header(a, "x-should-retry"), "<absent>");
  const auto body = nlohmann::json::parse(a.body);
  EXPECT_EQ(body["error"]["code"], "rate_limit_exceeded");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("'tpm'"), std::string::npos);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("per 1m0s"), std::string::npos);
}

TEST(QuotaStep, ASpentBudgetOrATooLargeRequestIsInsufficientQuotaNotToBeRetried) {
  for (const auto& r : {refusal(quota::Measure::kCost, {0, quota::Calendar::kMonth}, 86'400'000),
                        refusal(quota::Measure::kTokens, {0, quota::Calendar::kDay}, 5'000),
                        refusal(quota::Measure::kTokens, {60'000}, std::nullopt)}) {
    auto a = quota_refused(r);
    EXPECT_EQ(a.status, 429);
    EXPECT_EQ(a.code, "insufficient_quota");
    EXPECT_EQ(header(a, "x-should-retry"), "false");
    EXPECT_EQ(nlohmann::json::parse(a.body)["error"]["type"], "insufficient_quota");
  }
}

TEST(QuotaStep, RateLimitHeadersNameTheTightestOfEachKind) {
  quota::Headroom h;
  h.tokens = {true, 100'000, 98'000, 360'000};
  std::vector<std::pair<std::string_view, std::string>> out;
  rate_limit_headers(h, out);
  ASSERT_EQ(out.size(), 3u);  // no requests limit applies
  EXPECT_EQ(out[0].first, "x-ratelimit-limit-tokens");
  EXPECT_EQ(out[0].second, "100000");
  EXPECT_EQ(out[1].second, "98000");
  EXPECT_EQ(out[2].first, "x-ratelimit-reset-tokens");
  EXPECT_EQ(out[2].second, "6m0s");
  std::string lines;
  h.requests = {true, 60, 0, 20};
  append_rate_limit_lines(h, lines);
  EXPECT_EQ(lines,
            "x-ratelimit-limit-requests: 60\r\nx-ratelimit-remaining-requests: 0\r\n"
            "x-ratelimit-reset-requests: 20ms\r\nx-ratelimit-limit-tokens: 100000\r\n"
            "x-ratelimit-remaining-tokens: 98000\r\nx-ratelimit-reset-tokens: 6m0s\r\n");
}

TEST(QuotaStep, DurationsAreWrittenAsOpenAIWritesThem) {
  EXPECT_EQ(go_duration(0), "0s");
  EXPECT_EQ(go_duration(-5), "0s");
  EXPECT_EQ(go_duration(20), "20ms");
  EXPECT_EQ(go_duration(1000), "1s");
  EXPECT_EQ(go_duration(1500), "1.5s");
  EXPECT_EQ(go_duration(1004), "1.004s");
  EXPECT_EQ(go_duration(360'000), "6m0s");
  EXPECT_EQ(go_duration(3'723'004), "1h2m3.004s");
  EXPECT_EQ(go_duration(31LL * 86'400'000), "744h0m0s");
}

}  // namespace
}  // namespace sluice::admission
