// Issue 41, item 1: where quota limits attach, read and checked (nothing
// enforces them yet). Every bad input is an error naming its field and line.
#include <gtest/gtest.h>

#include "config/config.h"
#include "config/quota_limit.h"
#include "unit/config_errors.h"

namespace sluice::config {
namespace {

using namespace std::chrono_literals;

// The limit under test is the second of tenant acme's, on line 8.
std::string with_limit(const std::string& limit, const std::string& auth = "{apiKeys: {file: k}}") {
  return "auth: " + auth +
         "\n"
         "quota: {prices: [{model: 'llama*', input: 0.15, output: 0.6}]}\n"
         "tenants:\n"
         "  - id: acme\n"
         "    models: ['llama*', gpt-4o]\n"
         "    quotas:\n"
         "      - {name: tpm, tokens: 100k, window: 1m}\n"
         "      - " +
         limit + "\n";
}

// The error of the limit, which must name `field` on line `line`.
void expect_error(const std::string& text, const std::string& field, const std::string& what,
                  int line = 8) {
  const std::string e = unit::load_error(text);
  const std::string head = "test.yaml:" + std::to_string(line) + ": " + field + ": ";
  EXPECT_NE(e.find(head + what), std::string::npos) << "got: " << e << "\nwanted: " << head << what;
}

TEST(QuotaConfig, TheIssuesExampleParses) {
  auto c = load_config_string(R"(auth: {apiKeys: {file: keys.yaml}}
quota:
  prices:
    - {model: "*", input: 0.15, output: 0.6}
    - {model: llama-3-70b*, input: 2.5, output: 500m}
  failMode: closed
  headers: refused
  defaultOutputTokens: 2k
tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 100k, window: 1m}
      - {name: daily, tokens: 20M, calendar: day}
      - {name: big, tokens: 10k, window: 1m, models: ["llama-3-70b*"]}
      - {name: budget, cost: 500, calendar: month}
      - {name: rps, requests: 50, window: 1s, mode: shadow, onExceeded: queue}
)");
  ASSERT_EQ(c.tenants.size(), 1u);
  const auto& q = c.tenants[0].quotas;
  ASSERT_EQ(q.size(), 5u);
  QuotaLimitSpec tpm{"tpm", QuotaMeasure::kTokens, 100000, 1min};
  QuotaLimitSpec daily{"daily", QuotaMeasure::kTokens, 20000000, 0ns, QuotaCalendar::kDay};
  QuotaLimitSpec big{"big", QuotaMeasure::kTokens, 10000, 1min};
  big.models = {"llama-3-70b*"};
  QuotaLimitSpec budget{"budget", QuotaMeasure::kCost, 500000000, 0ns, QuotaCalendar::kMonth};
  QuotaLimitSpec rps{"rps", QuotaMeasure::kRequests, 50, 1s, QuotaCalendar::kNone, true, true};
  EXPECT_EQ(q[0], tpm);
  EXPECT_EQ(q[1], daily);
  EXPECT_EQ(q[2], big);
  EXPECT_EQ(q[3], budget);
  EXPECT_EQ(q[4], rps);
  EXPECT_EQ(q[0].line, 12);
  EXPECT_EQ(q[3].line, 15);
  ASSERT_EQ(c.quota.prices.size(), 2u);
  EXPECT_EQ(c.quota.prices[0], (ModelPrice{"*", 150000, 600000}));
  EXPECT_EQ(c.quota.prices[1], (ModelPrice{"llama-3-70b*", 2500000, 500000}));
  EXPECT_EQ(c.quota.fail_mode, QuotaFailMode::kClosed);
  EXPECT_EQ(c.quota.headers, QuotaHeaders::kRefused);
  EXPECT_EQ(c.quota.default_output_tokens, 2000u);
}

TEST(QuotaConfig, Defaults) {
  auto c = load_config_string("tenants: [{id: a}]");
  EXPECT_TRUE(c.tenants[0].quotas.empty());
  EXPECT_EQ(c.quota, QuotaSpec{});
  EXPECT_EQ(c.quota.fail_mode, QuotaFailMode::kLocal);
  EXPECT_EQ(c.quota.headers, QuotaHeaders::kAlways);
  EXPECT_EQ(c.quota.default_output_tokens, 4096u);
  EXPECT_EQ(c.quota.max_counted_tenants, 100000u);
  EXPECT_EQ(load_config_string("quota: {maxCountedTenants: 5k}").quota.max_counted_tenants, 5000u);
  // The good limits of the helper load.
  EXPECT_EQ(unit::load_error(with_limit("{name: x, tokens: 1k, window: 744h}")), "");
  EXPECT_EQ(unit::load_error(with_limit("{name: x, cost: 5, window: 1h, models: [llama-3*]}")), "");
  // A trusted proxy's fairness id names the tenant: identity enough.
  EXPECT_EQ(unit::load_error(
                with_limit("{name: x, requests: 5, window: 1s}", "{trustedProxies: [10.0.0.0/8]}")),
            "");
}

TEST(QuotaConfig, EachLimitHasOneMeasureAndOneWindow) {
  const std::string l = "tenants[0].quotas[1]";
  expect_error(with_limit("{name: x, tokens: 1k, requests: 5, window: 1m}"), l,
               "set exactly one of requests, inputTokens, outputTokens, tokens and cost");
  expect_error(with_limit("{name: x, window: 1m}"), l, "set exactly one of requests");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, calendar: day}"), l,
               "set exactly one of window and calendar");
  expect_error(with_limit("{name: x, tokens: 1k}"), l, "set exactly one of window and calendar");
  expect_error(with_limit("{tokens: 1k, window: 1m}"), l + ".name", "is required");
  expect_error(with_limit("{name: 'a b', tokens: 1k, window: 1m}"), l + ".name",
               "a limit's name is 1 to 64");
}

// The ledger holds 16 limits an owner (a request: its tenant's and its
// key's); a 17th would leave the tenant unlimited, so it is refused here.
TEST(QuotaConfig, AtMostSixteenLimitsATenant) {
  std::string limits = "{name: l0, tokens: 1k, window: 1m}";
  for (int i = 1; i < 17; ++i)
    limits += "\n      - {name: l" + std::to_string(i) + ", tokens: 1k, window: 1m}";
  const std::string e = unit::load_error(with_limit(limits));
  EXPECT_NE(e.find("tenants[0].quotas: at most 16 limits"), std::string::npos) << e;
}

TEST(QuotaConfig, AmountsArePositiveAndWellFormed) {
  const std::string l = "tenants[0].quotas[1]";
  expect_error(with_limit("{name: x, tokens: 0, window: 1m}"), l + ".tokens",
               "must be greater than zero");
  expect_error(with_limit("{name: x, inputTokens: lots, window: 1m}"), l + ".inputTokens",
               "expected a count like 100k or 20M, got 'lots'");
  expect_error(with_limit("{name: x, outputTokens: -5, window: 1m}"), l + ".outputTokens",
               "expected a count");
  expect_error(with_limit("{name: x, cost: 0.1234567, window: 1m}"), l + ".cost",
               "expected an amount like 500, 0.25 or 1.5k (at most 6 decimals)");
  expect_error(with_limit("{name: x, cost: 0, window: 1m}"), l + ".cost",
               "must be greater than zero");
}

TEST(QuotaConfig, WindowsAndCalendars) {
  const std::string l = "tenants[0].quotas[1]";
  expect_error(with_limit("{name: x, tokens: 1k, window: 0}"), l + ".window",
               "must be between 1s and 31d (744h), got '0'");
  expect_error(with_limit("{name: x, tokens: 1k, window: 745h}"), l + ".window",
               "must be between 1s and 31d");
  expect_error(with_limit("{name: x, tokens: 1k, window: 500ms}"), l + ".window",
               "must be between 1s and 31d");
  expect_error(with_limit("{name: x, tokens: 1k, window: soon}"), l + ".window",
               "expected a duration");
  expect_error(with_limit("{name: x, tokens: 1k, calendar: week}"), l + ".calendar",
               "expected day or month (UTC), got 'week'");
}

TEST(QuotaConfig, ModesAndUnknownFields) {
  const std::string l = "tenants[0].quotas[1]";
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, mode: warn}"), l + ".mode",
               "expected enforce or shadow, got 'warn'");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, onExceeded: wait}"), l + ".onExceeded",
               "expected refuse or queue, got 'wait'");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, burst: 5}"), l + ".burst",
               "unknown field");
  expect_error(with_limit("[tokens, 1k]"), l, "expected a mapping");
  expect_error(with_limit("{name: tpm, tokens: 1k, window: 1h}"), l + ".name",
               "duplicate limit 'tpm'");
}

TEST(QuotaConfig, ModelsStayWithinTheTenants) {
  const std::string m = "tenants[0].quotas[1].models";
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: ['mistral*']}"), m + "[0]",
               "'mistral*' is outside tenant 'acme''s models");
  // A shorter prefix than the tenant's matches models it may not use.
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: ['l*']}"), m + "[0]",
               "'l*' is outside");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: [gpt-4o, gpt-4o-mini]}"),
               m + "[1]", "'gpt-4o-mini' is outside");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: ['gpt*']}"), m + "[0]",
               "'gpt*' is outside");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: ['*']}"), m + "[0]",
               "a model is a name, or a prefix ending in '*'");
  expect_error(with_limit("{name: x, tokens: 1k, window: 1m, models: ['a*b']}"), m + "[0]",
               "a model is a name");
  EXPECT_EQ(unit::load_error(with_limit(
                "{name: x, tokens: 1k, window: 1m, models: [llama-3-8b, 'llama-3*', gpt-4o]}")),
            "");
}

TEST(QuotaConfig, CostNeedsAPriceForEveryModelItCounts) {
  const std::string c = "tenants[0].quotas[1].cost";
  expect_error(with_limit("{name: b, cost: 5, window: 1h, models: [gpt-4o]}"), c,
               "no price for model 'gpt-4o' under quota.prices");
  // No models on the limit: the tenant's, and gpt-4o has no price.
  expect_error(with_limit("{name: b, cost: 5, calendar: month}"), c, "no price for model 'gpt-4o'");
  // Neither: every model, which only a "*" price covers.
  expect_error(R"(auth: {apiKeys: {file: k}}
quota: {prices: [{model: 'llama*', input: 1, output: 1}]}
tenants:
  - id: acme
    quotas:
      - {name: b, cost: 5, calendar: month}
)",
               "tenants[0].quotas[0].cost", "no price for every model", 6);
  EXPECT_EQ(unit::load_error(R"(auth: {apiKeys: {file: k}}
quota: {prices: [{model: '*', input: 1, output: 1}]}
tenants: [{id: acme, models: [gpt-4o], quotas: [{name: b, cost: 5, calendar: month}]}]
)"),
            "");
}

TEST(QuotaConfig, QuotasNeedAuth) {
  expect_error(R"(tenants:
  - id: acme
    quotas:
      - {name: tpm, tokens: 100k, window: 1m}
)",
               "tenants[0].quotas", "quotas need auth: (apiKeys, jwt, clientCertificateTenants", 4);
  // An auth: section that identifies no one is none either.
  expect_error("auth: {realm: x}\ntenants: [{id: a, quotas: [{name: t, tokens: 1, window: 1m}]}]",
               "tenants[0].quotas", "quotas need auth:", 2);
}

TEST(QuotaConfig, TheQuotaSection) {
  expect_error("quota: {failMode: maybe}", "quota.failMode",
               "expected open, closed or local, got 'maybe'", 1);
  expect_error("quota: {headers: sometimes}", "quota.headers",
               "expected always, refused or never, got 'sometimes'", 1);
  expect_error("quota: {defaultOutputTokens: 0}", "quota.defaultOutputTokens",
               "must be between 1 and 1000000000", 1);
  expect_error("quota: {maxCountedTenants: 0}", "quota.maxCountedTenants",
               "must be between 1 and 10000000", 1);
  expect_error("quota: {burst: 1}", "quota.burst", "unknown field", 1);
  expect_error("quota:\n  prices:\n    - {model: a, input: 1.2345678, output: 1}",
               "quota.prices[0].input", "expected a price like 0.15 or 2.5 (at most 6 decimals)",
               3);
  expect_error("quota:\n  prices:\n    - {model: a, input: 1}", "quota.prices[0].output",
               "is required", 3);
  expect_error(
      "quota:\n  prices:\n    - {model: a, input: 1, output: 1}\n"
      "    - {model: a, input: 2, output: 2}",
      "quota.prices[1].model", "duplicate price for 'a'", 4);
  expect_error("quota:\n  prices:\n    - {model: 'a*b', input: 1, output: 1}",
               "quota.prices[0].model", "a model is a name, a prefix ending in '*', or *", 3);
}

// The patterns' containment, as the checks above and the key API use it.
TEST(QuotaLimit, PatternsAndWiderLimits) {
  EXPECT_TRUE(model_pattern_inside("llama-3*", {"llama*"}));
  EXPECT_TRUE(model_pattern_inside("llama*", {"llama*"}));
  EXPECT_FALSE(model_pattern_inside("l*", {"llama*"}));
  EXPECT_TRUE(model_pattern_inside("gpt-4o", {"gpt-4o"}));
  EXPECT_FALSE(model_pattern_inside("gpt*", {"gpt-4o"}));
  EXPECT_TRUE(model_pattern_inside("anything", {}));
  EXPECT_FALSE(price_covers({}, "a"));
  EXPECT_TRUE(price_covers({{"*", 1, 1}}, "*"));
  EXPECT_FALSE(price_covers({{"a*", 1, 1}}, "*"));
  EXPECT_TRUE(price_covers({{"a*", 1, 1}}, "ab*"));
  const std::vector<QuotaLimitSpec> tenant{
      {"tpm", QuotaMeasure::kTokens, 100, 1min},
      {"day", QuotaMeasure::kTokens, 1000, 0ns, QuotaCalendar::kDay}};
  QuotaLimitSpec key{"k", QuotaMeasure::kTokens, 200, 1min};
  ASSERT_NE(tenant_limit_narrower_than(key, tenant), nullptr);
  EXPECT_EQ(tenant_limit_narrower_than(key, tenant)->name, "tpm");
  key.amount = 100;  // equal is within
  EXPECT_EQ(tenant_limit_narrower_than(key, tenant), nullptr);
  key.amount = 200;
  key.window = 1h;  // another window: not comparable
  EXPECT_EQ(tenant_limit_narrower_than(key, tenant), nullptr);
  std::vector<QuotaLimitSpec> per_model{{"big", QuotaMeasure::kTokens, 10, 1min}};
  per_model[0].models = {"llama*"};
  key.window = 1min;
  EXPECT_EQ(tenant_limit_narrower_than(key, per_model), nullptr);  // the key counts more models
  key.models = {"llama-3*"};
  EXPECT_NE(tenant_limit_narrower_than(key, per_model), nullptr);
}

TEST(QuotaLimit, FieldsReadBackTheSameLimit) {
  QuotaLimitSpec l{"budget", QuotaMeasure::kCost, 1500001, 90min, QuotaCalendar::kNone, true, true};
  for (auto w : {std::chrono::nanoseconds(1s), std::chrono::nanoseconds(1500ms),
                 std::chrono::nanoseconds(36h), std::chrono::nanoseconds(90min)}) {
    l.window = w;
    QuotaLimitDraft d;
    for (const auto& [k, v] : quota_limit_fields(l)) EXPECT_EQ(d.set(k, v), "") << k << "=" << v;
    QuotaLimitSpec back;
    EXPECT_FALSE(d.finish(back));
    EXPECT_EQ(back, l) << format_window(w);
  }
}

}  // namespace
}  // namespace sluice::config
