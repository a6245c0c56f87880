// Identity where two parts meet (issue 39): a tenant's max_tokens ceiling
// against every output-token limit a body can carry, and a trusted proxy's
// request under the policy of the tenant it names. Each hostile body is
// sent; the test checks the status, the reason, what the engine received,
// and that nothing else was lost.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "auth/api_keys.h"
#include "flow_control_harness.h"
#include "key_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

FakeUpstream::Reply ok_reply(const UpstreamRequest&) {
  return FakeUpstream::Reply{FakeUpstream::response(
      200, R"({"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}})")};
}

// The inference requests the engine received (the model catalogue's
// GET /v1/models polls left out).
std::vector<UpstreamRequest> inference_requests(FakeUpstream& up) {
  std::vector<UpstreamRequest> out;
  for (auto& q : up.requests())
    if (q.head.rfind("POST ", 0) == 0) out.push_back(q);
  return out;
}

std::vector<json> access_lines(const std::string& path, std::size_t n) {
  std::vector<json> out;
  eventually([&] {
    out.clear();
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(json::parse(line));
    return out.size() >= n;
  });
  return out;
}

void expect_refused(const Response& r, int status, const std::string& code,
                    const std::string& reason) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), reason) << r.body;
  auto body = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r.body;
  EXPECT_EQ(body["error"]["code"], code) << r.body;
}

constexpr const char* kObjectives = R"(objectives:
  - {name: interactive, priority: 10}
  - {name: standard, priority: 5}
)";

// Item 1: every one of max_tokens, max_completion_tokens and
// max_output_tokens present is within the ceiling, in any order; clamp
// rewrites each one present, refuse answers 400 if any is above.
TEST(IdentitySeams, TheMaxTokensCeilingHoldsForEveryOutputLimitField) {
  Key clamp = make_key("clamped", "key_c");
  Key strict = make_key("strict", "key_s");
  Key scoped = make_key("wide", "key_w", 8);  // its tenant has no ceiling
  FakeUpstream up(ok_reply);
  TempFile keys(auth::render_key_file({clamp.record, strict.record, scoped.record}), "keys.yaml");
  TempFile cfg(make_config({up.address()}) + kObjectives +
               "auth:\n  apiKeys: {file: " + keys.path() + "}\n" + R"(tenants:
  - {id: clamped, maxTokens: 16}
  - {id: strict, maxTokens: 16, aboveMaxTokens: refuse}
)");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  const std::string chat = R"({"model":"mock-model","messages":[{"role":"user","content":"x"}],)";
  const std::string responses = R"({"model":"mock-model","input":"x",)";
  const std::string completion = R"({"model":"mock-model","prompt":"x",)";

  // The bypasses of the issue, under clamp: each field present is cut to
  // the ceiling, the smaller one kept.
  EXPECT_EQ(
      c.post_json("/v1/chat/completions",
                  chat + R"("max_completion_tokens":100000,"max_tokens":5})", bearer(clamp.secret))
          .status,
      200);
  EXPECT_EQ(
      c.post_json("/v1/responses", responses + R"("max_output_tokens":100000,"max_tokens":5})",
                  bearer(clamp.secret))
          .status,
      200);
  // The order does not matter, nor a key given twice, nor a null after a
  // number (the engine reads the last: null, no limit at all).
  EXPECT_EQ(
      c.post_json("/v1/chat/completions",
                  chat + R"("max_tokens":5,"max_completion_tokens":100000})", bearer(clamp.secret))
          .status,
      200);
  EXPECT_EQ(c.post_json("/v1/completions", completion + R"("max_tokens":5,"max_tokens":null})",
                        bearer(clamp.secret))
                .status,
            200);
  // Every one null (the engine's "no limit"): each written as the ceiling.
  EXPECT_EQ(c.post_json("/v1/chat/completions",
                        chat + R"("max_tokens":null,"max_completion_tokens":null,)"
                               R"("max_output_tokens":null})",
                        bearer(clamp.secret))
                .status,
            200);
  // None at all on /v1/responses: the ceiling in the member its engines read.
  EXPECT_EQ(
      c.post_json("/v1/responses", R"({"model":"mock-model","input":"x"})", bearer(clamp.secret))
          .status,
      200);
  // A key's own maxTokens scope, the same way.
  EXPECT_EQ(
      c.post_json("/v1/chat/completions",
                  chat + R"("max_completion_tokens":100000,"max_tokens":5})", bearer(scoped.secret))
          .status,
      200);

  // Under refuse: 400 naming the field above the ceiling.
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions", chat + R"("max_completion_tokens":100000,"max_tokens":5})"},
           {"/v1/responses", responses + R"("max_output_tokens":100000,"max_tokens":5})"},
           {"/v1/completions", completion + R"("max_tokens":5,"max_tokens":17})"}}) {
    SCOPED_TRACE(body);
    auto r = c.post_json(path, body, bearer(strict.secret));
    expect_refused(r, 400, "max_tokens_exceeded", "max-tokens-exceeded");
  }
  // Not a non-negative integer: 400, under any policy (and without one).
  for (const char* bad : {R"("max_completion_tokens":"100000"})", R"("max_output_tokens":1.5})",
                          R"("max_tokens":-1})", R"("max_completion_tokens":1e9})"}) {
    SCOPED_TRACE(bad);
    auto r = c.post_json("/v1/chat/completions", chat + bad, bearer(clamp.secret));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid-field") << r.body;
  }

  const auto seen = inference_requests(up);
  ASSERT_EQ(seen.size(), 7u);  // the refused never reached the engine
  const auto b0 = json::parse(seen[0].body);
  EXPECT_EQ(b0["max_completion_tokens"], 16);
  EXPECT_EQ(b0["max_tokens"], 5);
  const auto b1 = json::parse(seen[1].body);
  EXPECT_EQ(b1["max_output_tokens"], 16);
  EXPECT_EQ(b1["max_tokens"], 5);
  const auto b2 = json::parse(seen[2].body);
  EXPECT_EQ(b2["max_completion_tokens"], 16);
  EXPECT_EQ(b2["max_tokens"], 5);
  EXPECT_EQ(seen[3].body.find("null"), std::string::npos) << seen[3].body;
  EXPECT_EQ(json::parse(seen[3].body)["max_tokens"], 5);
  const auto nulls = json::parse(seen[4].body);
  for (const char* k : {"max_tokens", "max_completion_tokens", "max_output_tokens"})
    EXPECT_EQ(nulls[k], 16) << k;
  const auto b5 = json::parse(seen[5].body);
  EXPECT_EQ(b5["max_output_tokens"], 16);
  EXPECT_FALSE(b5.contains("max_tokens"));
  const auto b6 = json::parse(seen[6].body);
  EXPECT_EQ(b6["max_completion_tokens"], 8);
  EXPECT_EQ(b6["max_tokens"], 5);
  // The rest of each body went as it came.
  EXPECT_EQ(b0["messages"][0]["content"], "x");
  EXPECT_EQ(b1["input"], "x");
  // Nothing else was lost: the next request is served.
  EXPECT_EQ(c.post_json("/v1/completions", completion + R"("max_tokens":3})", bearer(strict.secret))
                .status,
            200);
}

// Item 6: a trusted proxy names the tenant; the tenant's policy holds.
class TrustedProxyPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    up_ = std::make_unique<FakeUpstream>([this](const UpstreamRequest& r) {
      if (r.body.find("hold-me") == std::string::npos) return ok_reply(r);
      FakeUpstream::Reply reply;
      reply.bytes =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{";
      reply.then = [this] {
        std::unique_lock lock(mu_);
        held_ = true;
        cv_.notify_all();
        cv_.wait(lock, [this] { return released_; });
        return std::string("}");
      };
      return reply;
    });
    log_ = std::make_unique<TempFile>("", "access.log");
    cfg_ = std::make_unique<TempFile>(
        make_config({up_->address()}, "  accessLog: " + log_->path() + "\n") + kObjectives +
        R"(auth:
  trustedProxies: [127.0.0.1/32]
tenants:
  - id: acme
    models: [mock-model]
    maxObjective: standard
    maxTokens: 16
    maxConcurrency: 1
    subflows: [ui]
  - id: "*"
    maxTokens: 32
)");
    sluice_ = start_sluice(*cfg_);
    ASSERT_TRUE(sluice_);
  }
  void TearDown() override { release(); }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  Response post(const std::string& flow_id, const std::string& body,
                const std::string& objective = "") {
    HttpClient c(kHost, sluice_->port());
    return c.post_json("/v1/completions", body, flow(flow_id, objective));
  }
  static std::string body(const std::string& model, int max_tokens,
                          const std::string& prompt = "x") {
    return R"({"model":")" + model + R"(","prompt":")" + prompt + R"(","max_tokens":)" +
           std::to_string(max_tokens) + "}";
  }

  std::unique_ptr<FakeUpstream> up_;
  std::unique_ptr<TempFile> log_, cfg_;
  std::unique_ptr<Process> sluice_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, released_ = false;
};

TEST_F(TrustedProxyPolicy, TheNamedTenantsModelsObjectiveMaxTokensAndConcurrencyHold) {
  // Models outside the tenant's list: 403, as for its own keys.
  expect_refused(post("acme", body("other-model", 1)), 403, "model_not_allowed",
                 "model-not-allowed");
  // max_tokens above the ceiling: clamped; the objective above the
  // ceiling: clamped to it.
  EXPECT_EQ(post("acme", body("mock-model", 500), "interactive").status, 200);
  // A sub-flow the tenant may choose, and one it may not.
  EXPECT_EQ(post("acme/ui", body("mock-model", 1)).status, 200);
  EXPECT_EQ(post("acme/zzz", body("mock-model", 1)).status, 200);
  // A tenant not listed: the "*" policy.
  EXPECT_EQ(post("nobody", body("mock-model", 500)).status, 200);

  // maxConcurrency: one request of acme held at the engine, the next 429,
  // another tenant's unaffected.
  Response first;
  std::thread holder([&] { first = post("acme", body("mock-model", 1, "hold-me")); });
  bool held = false;
  {
    std::unique_lock lock(mu_);
    held = cv_.wait_for(lock, std::chrono::seconds(10), [this] { return held_; });
  }
  if (!held) {
    release();
    holder.join();
    FAIL() << "the first request never reached the engine: " << first.status;
  }
  expect_refused(post("acme/ui", body("mock-model", 1)), 429, "tenant_concurrency_limit",
                 "tenant-concurrency-limit");
  EXPECT_EQ(post("nobody", body("mock-model", 1)).status, 200);
  release();
  holder.join();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(post("acme", body("mock-model", 1)).status, 200);  // the permit is back

  const auto seen = inference_requests(*up_);
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(json::parse(seen[0].body)["max_tokens"], 16);  // acme's ceiling
  EXPECT_EQ(json::parse(seen[3].body)["max_tokens"], 32);  // "*"'s
  // The access log: who each was served as. Lines are written by each
  // I/O thread: found by content, not by order.
  const auto lines = access_lines(log_->path(), 9);
  EXPECT_EQ(lines.size(), 9u);
  std::map<std::string, int> flows;
  for (const auto& l : lines) {
    if (l["status"] != 200) continue;
    flows[l["flow"].get<std::string>()] += 1;
    if (l["flow"] == "acme" && l["priority"] != 0) {
      EXPECT_EQ(l["objective"], "standard");  // clamped from interactive
      EXPECT_EQ(l["tenant"], "acme");
    }
  }
  EXPECT_EQ(flows["acme"], 4);     // acme, acme/zzz (not its sub-flow), the held one, the last
  EXPECT_EQ(flows["acme/ui"], 1);  // a sub-flow it may choose
  EXPECT_EQ(flows["nobody"], 2);
}

}  // namespace
}  // namespace sluice::test
