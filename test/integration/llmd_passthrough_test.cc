// llm-d v1.0's requestHandler.parsers end to end (issue 40, item 1):
// passthrough-parser forwards what no parser before it claims, its body
// unread, admitted and scheduled like any request; without it sluice parses
// the OpenAI paths and answers 404 elsewhere.
#include <nlohmann/json.hpp>

#include "integration/key_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using nlohmann::json;

// Echoes what it received: method and target, and the body.
// The requests sluice forwarded (not its own GET /v1/models polls).
std::size_t forwarded(FakeUpstream& up) {
  std::size_t n = 0;
  for (const auto& r : up.requests()) n += r.head.rfind("GET /v1/models ", 0) != 0;
  return n;
}

FakeUpstream::Reply echo(const UpstreamRequest& r) {
  const std::string line = r.head.substr(0, r.head.find("\r\n"));
  return FakeUpstream::Reply{
      FakeUpstream::response(200, json{{"line", line}, {"body", r.body}}.dump())};
}

const std::string kBoth =
    "plugins:\n- type: openai-parser\n- type: passthrough-parser\n"
    "requestHandler:\n  parsers:\n  - pluginRef: openai-parser\n"
    "  - pluginRef: passthrough-parser\n";

TEST(LlmdPassthrough, OtherPathsAreForwardedUnreadAndTheOpenAiPathsStillParsed) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}) + kBoth);
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  // Not JSON, on a path sluice does not know: forwarded as it came.
  auto r = c.request("POST", "/tokenize?x=1", "not json at all", {{"Content-Type", "text/plain"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["line"], "POST /tokenize?x=1 HTTP/1.1");
  EXPECT_EQ(json::parse(r.body)["body"], "not json at all");
  // The methods of an HTTP API pass; TRACE does not.
  EXPECT_EQ(c.request("DELETE", "/v1/files/abc", "").status, 200);
  EXPECT_EQ(c.request("TRACE", "/anything", "").status, 405);
  // An OpenAI path is still parsed: a body that is not JSON is sluice's 400,
  // and never reaches the endpoint.
  const auto before = forwarded(up);
  auto bad = c.post_json("/v1/chat/completions", "{not json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(forwarded(up), before);
  EXPECT_EQ(sluice->stop(), 0);
}

TEST(LlmdPassthrough, WithoutItOtherPathsAre404) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  auto r = c.request("POST", "/tokenize", "x", {{"Content-Type", "text/plain"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "not-found");
  EXPECT_EQ(forwarded(up), 0u);
  EXPECT_EQ(sluice->stop(), 0);
}

TEST(LlmdPassthrough, AloneItTakesTheOpenAiPathsUnreadAndNeverRewritesTheBody) {
  FakeUpstream up(echo);
  // propagatePriority would write the band into a parsed body: not into an
  // unread one.
  TempFile cfg(make_config({up.address()}) +
               "plugins:\n- type: passthrough-parser\nrequestHandler:\n  propagatePriority: true\n"
               "  parsers:\n  - pluginRef: passthrough-parser\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  const std::string body = R"({"model":"m","priority":-99,"messages":"not an OpenAI shape"})";
  auto r = c.post_json("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["body"], body);
  EXPECT_EQ(sluice->stop(), 0);
}

TEST(LlmdPassthrough, PropagatePriorityWritesTheBandIntoParsedBodies) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}) + "objectives:\n  - {name: high, priority: 10}\n" +
               "requestHandler:\n  propagatePriority: true\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/completions", R"({"model":"m","prompt":"x","priority":-99})",
                       {{"x-llm-d-inference-objective", "high"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto sent = json::parse(std::string(json::parse(r.body)["body"]));
  // The band's, as vLLM reads it (lower first): never the client's -99.
  EXPECT_EQ(sent["priority"], -10);
  EXPECT_EQ(sluice->stop(), 0);
}

// A tenant held to models or max_tokens cannot be held to them on a body
// sluice does not read: refused; a tenant without them passes.
TEST(LlmdPassthrough, ATenantLimitedByModelOrMaxTokensIsRefusedAnUnreadRequest) {
  Key limited = make_key("limited", "key_l");
  Key scoped = make_key("free", "key_s", 8);  // the key's own maxTokens scope
  Key open = make_key("free", "key_o");
  FakeUpstream up(echo);
  TempFile keys(auth::render_key_file({limited.record, scoped.record, open.record}), "keys.yaml");
  TempFile cfg(make_config({up.address()}) + kBoth + "auth:\n  apiKeys: {file: " + keys.path() +
               "}\n" + "tenants:\n  - {id: limited, models: [m]}\n  - {id: free}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  for (const Key* k : {&limited, &scoped}) {
    auto r = c.request("POST", "/generate", "{}", bearer(k->secret));
    EXPECT_EQ(r.status, 403) << k->record.id << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "passthrough_not_allowed") << r.body;
  }
  EXPECT_EQ(forwarded(up), 0u);
  // The same tenant on an OpenAI path, and an unlimited one anywhere: served.
  EXPECT_EQ(c.post_json("/v1/completions", R"({"model":"m","prompt":"x"})", bearer(limited.secret))
                .status,
            200);
  EXPECT_EQ(c.request("POST", "/generate", "{}", bearer(open.secret)).status, 200);
  // No credential at all: 401, as on any path.
  EXPECT_EQ(c.request("POST", "/generate", "{}").status, 401);
  EXPECT_EQ(forwarded(up), 2u);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
