#include "auth/api_keys.h"

#include <gtest/gtest.h>

#include <functional>

namespace sluice::auth {
namespace {

TEST(ApiKeys, GeneratedKeyChecksAndIsShownOnlyByPrefix) {
  auto k = generate_key("acme");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->key.size(), 10u + 43u);
  EXPECT_EQ(k->key.rfind("sk-sluice-", 0), 0u);
  EXPECT_EQ(k->record.prefix, k->key.substr(0, 14));
  EXPECT_TRUE(is_valid_key_id(k->record.id));
  // The record holds no part of the secret beyond the prefix.
  EXPECT_EQ(render_key_file({k->record}).find(k->key.substr(14)), std::string::npos);
  KeyStore store({k->record});
  const KeyRecord* r = nullptr;
  EXPECT_EQ(store.check(k->key, 0, &r), KeyCheck::kOk);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->tenant, "acme");
  // One character off, a prefix, the key with a suffix: unknown.
  std::string off = k->key;
  off.back() = off.back() == 'A' ? 'B' : 'A';
  for (const std::string& bad : {off, k->key.substr(0, 52), k->key + "x", std::string()}) {
    EXPECT_EQ(store.check(bad, 0, &r), KeyCheck::kUnknown);
    EXPECT_EQ(r, nullptr);
  }
  auto k2 = generate_key("acme");
  ASSERT_TRUE(k2);
  EXPECT_NE(k->key, k2->key);
}

TEST(ApiKeys, ExpiredAndDisabled) {
  auto a = generate_key("t1", "key_a");
  auto b = generate_key("t2", "key_b");
  ASSERT_TRUE(a && b);
  a->record.expires_at = 1000;
  b->record.disabled = true;
  KeyStore store({a->record, b->record});
  const KeyRecord* r = nullptr;
  EXPECT_EQ(store.check(a->key, 999, &r), KeyCheck::kOk);
  EXPECT_EQ(store.check(a->key, 1000, &r), KeyCheck::kExpired);
  EXPECT_EQ(r->id, "key_a");  // the record is named, for the log
  EXPECT_EQ(store.check(b->key, 0, &r), KeyCheck::kDisabled);
  EXPECT_EQ(to_string(KeyCheck::kExpired), "key-expired");
  ASSERT_NE(store.find_id("key_b"), nullptr);
  EXPECT_EQ(store.records().size(), 2u);
}

TEST(ApiKeys, KeyFileRoundTrips) {
  auto a = generate_key("acme", "key_1");
  auto b = generate_key("beta.org:team", "key_2");
  ASSERT_TRUE(a && b);
  a->record.expires_at = parse_expiry("2027-01-01T00:00:00Z");
  b->record.disabled = true;
  b->record.models = {"llama-3-8b", "qwen/*"};
  b->record.max_objective = "batch";
  b->record.max_tokens = 512;
  std::vector<KeyRecord> back;
  std::string error;
  ASSERT_TRUE(parse_key_file(render_key_file({a->record, b->record}), back, error)) << error;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], a->record);
  EXPECT_EQ(back[1], b->record);
  EXPECT_EQ(*a->record.expires_at, 1798761600);
}

TEST(ApiKeys, KeyFileErrorsNameTheLine) {
  const std::string h(64, 'a');
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {"keys: [{id: k, tenant: t, sha256: xyz}]", "sha256"},
      {"keys: [{tenant: t, sha256: " + h + "}]", "id:"},
      {"keys: [{id: k, sha256: " + h + "}]", "tenant:"},
      {"keys: [{id: k, tenant: 'a/b', sha256: " + h + "}]", "tenant:"},
      {"keys: [{id: k, tenant: t}]", "sha256 is required"},
      {"keys: [{id: 'k k', tenant: t, sha256: " + h + "}]", "id:"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", expires: tomorrow}]", "expires"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", expires: 2027-02-31T00:00:00Z}]", "expires"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", disabled: yes}]", "disabled"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", color: red}]", "unknown field color"},
      {"keys:\n  - {id: k, tenant: t, sha256: " + h +
           "}\n  - {id: k, tenant: u, sha256: " + std::string(64, 'b') + "}",
       "line 3: repeated id k"},
      {"keys:\n  - {id: k, tenant: t, sha256: " + h + "}\n  - {id: j, tenant: u, sha256: " + h +
           "}",
       "same key hash"},
      {"keys: {id: k}", "must be a list"},
      {"other: 1", "unknown field"},
      {"keys: [ [1, 2] ]", "mapping"},
      {"keys: [{id: [k], tenant: t}]", "plain value"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", models: llama}]", "models: a list"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", models: ['a*b']}]", "'*' only last"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", models: ['*']}]", "models:"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", models: ['a\"b']}]", "no quote"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", models: [[a]]}]", "names only"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", maxTokens: -1}]", "maxTokens"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", maxTokens: 99999999999}]", "maxTokens"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", maxTokens: 2000000000}]", "at most"},
      {"keys: [{id: k, tenant: t, sha256: " + h + ", maxObjective: 'a b'}]", "maxObjective"},
      {"{{{", ""},
  };
  for (const auto& c : cases) {
    std::vector<KeyRecord> out;
    std::string error;
    EXPECT_FALSE(parse_key_file(c.text, out, error)) << c.text;
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.text << " -> " << error;
    EXPECT_TRUE(out.empty());
  }
  std::vector<KeyRecord> out;
  std::string error;
  EXPECT_TRUE(parse_key_file("", out, error));
  EXPECT_TRUE(parse_key_file("keys: []", out, error));
}

TEST(ApiKeys, Expiry) {
  EXPECT_EQ(parse_expiry("0"), 0);
  EXPECT_EQ(parse_expiry("1798761600"), 1798761600);
  EXPECT_EQ(parse_expiry("2027-01-01T00:00:00Z"), 1798761600);
  EXPECT_EQ(format_expiry(1798761600), "2027-01-01T00:00:00Z");
  for (const char* bad : {"", "-1", "2027-01-01", "2027-13-01T00:00:00Z", "2027-01-01T24:00:00Z",
                          "2027-01-01T00:00:00+01:00", "1e9", "1234567890123"})
    EXPECT_FALSE(parse_expiry(bad)) << bad;
}

// Issue 39, item 3: every expiry parse_expiry takes is written by
// format_expiry as a date parse_expiry reads back the same; past year 9999
// it is refused instead of written as a date nothing reads.
TEST(ApiKeys, ExpiryWithinWhatTheFileRoundTrips) {
  EXPECT_EQ(parse_expiry("253402300799"), kMaxKeyExpiry);
  EXPECT_EQ(format_expiry(kMaxKeyExpiry), "9999-12-31T23:59:59Z");
  EXPECT_EQ(parse_expiry("9999-12-31T23:59:59Z"), kMaxKeyExpiry);
  for (const char* bad : {"253402300800", "999999999999"}) EXPECT_FALSE(parse_expiry(bad)) << bad;
  for (std::int64_t e : {std::int64_t{0}, std::int64_t{1798761600}, kMaxKeyExpiry})
    EXPECT_EQ(parse_expiry(format_expiry(e)), e) << e;
}

// The one check of a record: what it accepts renders into a file that
// parse_key_file reads back the same; what it refuses has a typed code.
TEST(ApiKeys, CheckKeyRecordIsTheFileReadersCheck) {
  auto k = generate_key("acme", "k1");
  ASSERT_TRUE(k);
  EXPECT_FALSE(check_key_record(k->record));
  struct Case {
    std::function<void(KeyRecord&)> change;
    std::string code;
  };
  const std::vector<Case> cases = {
      {[](KeyRecord& r) { r.expires_at = kMaxKeyExpiry + 1; }, "invalid-expires"},
      {[](KeyRecord& r) { r.expires_at = -1; }, "invalid-expires"},
      {[](KeyRecord& r) { r.expires_at = 999999999999; }, "invalid-expires"},
      {[](KeyRecord& r) { r.id = "a b"; }, "invalid-id"},
      {[](KeyRecord& r) { r.tenant = "a/b"; }, "invalid-tenant"},
      {[](KeyRecord& r) { r.hash = Digest{}; }, "invalid-sha256"},
      {[](KeyRecord& r) { r.max_tokens = kMaxKeyMaxTokens + 1; }, "invalid-scope"},
  };
  for (const auto& c : cases) {
    KeyRecord r = k->record;
    c.change(r);
    EXPECT_EQ(check_key_record(r).code, c.code);
  }
  KeyRecord last = k->record;
  last.expires_at = kMaxKeyExpiry;
  ASSERT_FALSE(check_key_record(last));
  std::vector<KeyRecord> back;
  std::string error;
  ASSERT_TRUE(parse_key_file(render_key_file({last}), back, error)) << error;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], last);
}

// Issue 41, item 1: a key's own quotas in the key file.
TEST(ApiKeys, KeyFileRoundTripsQuotas) {
  using namespace std::chrono_literals;
  using config::QuotaCalendar;
  using config::QuotaMeasure;
  auto k = generate_key("acme", "key_q");
  ASSERT_TRUE(k);
  config::QuotaLimitSpec tpm{"tpm", QuotaMeasure::kTokens, 20000, 1min};
  tpm.models = {"llama-3*", "gpt-4o"};
  config::QuotaLimitSpec budget{"budget", QuotaMeasure::kCost, 250001, 0ns, QuotaCalendar::kMonth};
  config::QuotaLimitSpec rps{"rps", QuotaMeasure::kRequests, 5, 1500ms, QuotaCalendar::kNone, true,
                             true};
  config::QuotaLimitSpec out{"out", QuotaMeasure::kOutputTokens, 7, 36h};
  config::QuotaLimitSpec in{"in", QuotaMeasure::kInputTokens, 9, 0ns, QuotaCalendar::kDay};
  k->record.quotas = {tpm, budget, rps, out, in};
  ASSERT_FALSE(check_key_record(k->record)) << check_key_record(k->record).message;
  std::vector<KeyRecord> back;
  std::string error;
  const std::string text = render_key_file({k->record});
  ASSERT_TRUE(parse_key_file(text, back, error)) << error << "\n" << text;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], k->record) << text;
  // As a person writes it.
  const std::string h(64, 'a');
  ASSERT_TRUE(parse_key_file("keys:\n  - id: k\n    tenant: t\n    sha256: " + h +
                                 "\n    quotas:\n      - {name: tpm, tokens: 20k, window: 1m}\n"
                                 "      - {name: b, cost: 0.25, calendar: day}\n",
                             back, error))
      << error;
  ASSERT_EQ(back[0].quotas.size(), 2u);
  EXPECT_EQ(back[0].quotas[0], (config::QuotaLimitSpec{"tpm", QuotaMeasure::kTokens, 20000, 1min}));
  EXPECT_EQ(back[0].quotas[1].amount, 250000u);
}

TEST(ApiKeys, KeyFileQuotaErrorsNameTheLineAndField) {
  const std::string head =
      "keys:\n  - id: k\n    tenant: t\n    sha256: " + std::string(64, 'a') + "\n    quotas:\n";
  struct Case {
    std::string limit, expect;
  };
  const Case cases[] = {
      {"{name: a, tokens: 1k, window: 0}", "line 6: quotas[0].window: must be between 1s and 31d"},
      {"{name: a, tokens: 1k, calendar: week}",
       "line 6: quotas[0].calendar: expected day or month"},
      {"{name: a, tokens: 1k}", "line 6: quotas[0]: set exactly one of window and calendar"},
      {"{name: a, tokens: 1k, cost: 1, window: 1m}", "quotas[0]: set exactly one of requests"},
      {"{name: a, tokens: 0, window: 1m}", "quotas[0].tokens: must be greater than zero"},
      {"{name: a, tokens: 1k, window: 1m, mode: warn}", "quotas[0].mode: expected enforce"},
      {"{name: a, tokens: 1k, window: 1m, burst: 2}", "quotas[0].burst: unknown field"},
      {"{name: a, tokens: 1k, window: 1m, models: ['*']}", "quotas[0].models: a model is"},
      {"{name: a, tokens: 1k, window: 1m, models: llama}", "quotas[0].models: a list of models"},
      {"{tokens: 1k, window: 1m}", "quotas[0].name: is required"},
      {"[1]", "quotas[0]: a mapping"},
  };
  for (const auto& c : cases) {
    std::vector<KeyRecord> out;
    std::string error;
    EXPECT_FALSE(parse_key_file(head + "      - " + c.limit + "\n", out, error)) << c.limit;
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.limit << " -> " << error;
  }
  std::vector<KeyRecord> out;
  std::string error;
  EXPECT_FALSE(parse_key_file(head + "      - {name: a, tokens: 1, window: 1m}\n" +
                                  "      - {name: a, tokens: 2, window: 1h}\n",
                              out, error));
  EXPECT_NE(error.find("quotas[1].name: duplicate limit 'a'"), std::string::npos) << error;
  EXPECT_FALSE(parse_key_file(head + "      {name: a}\n", out, error));
  EXPECT_NE(error.find("quotas: a list of at most 16 limits"), std::string::npos) << error;
  // check_key_record holds a record made in code to the same rules.
  auto k = generate_key("acme", "k1");
  ASSERT_TRUE(k);
  k->record.quotas = {{"a", config::QuotaMeasure::kTokens, 1, std::chrono::hours(745)}};
  EXPECT_EQ(check_key_record(k->record).code, "invalid-quota");
  k->record.quotas = {{"a", config::QuotaMeasure::kTokens, 0, std::chrono::minutes(1)}};
  EXPECT_EQ(check_key_record(k->record).code, "invalid-quota");
  k->record.quotas = {{"a", config::QuotaMeasure::kTokens, 1, std::chrono::minutes(1)}};
  k->record.quotas[0].models = {"a\"b"};
  EXPECT_EQ(check_key_record(k->record).code, "invalid-quota");
}

}  // namespace
}  // namespace sluice::auth
