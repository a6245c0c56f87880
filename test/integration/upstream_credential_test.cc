// The model servers' credential (server.upstreamCredentialFile,
// endpoints[].credentialFile): what the engine receives on inference
// requests and pass-through GETs, the client's own Authorization kept
// back, a reload reading the file again, and a missing file refused.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

FakeUpstream::Responder answer_ok() {
  return [](const UpstreamRequest&) {
    return FakeUpstream::Reply{FakeUpstream::response(
        200, R"({"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}})")};
  };
}

Headers client_authorization() { return {{"Authorization", "Bearer client-own-secret"}}; }

TEST(UpstreamCredential, ReplacesTheClientsAuthorizationOnInferenceAndPassThrough) {
  FakeUpstream up(answer_ok());
  TempFile token("pool-token-1\n", "engine.token");
  TempFile cfg(make_config({up.address()}, "  upstreamCredentialFile: " + token.path() + "\n"));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/completions", completion_body(1), client_authorization());
  EXPECT_EQ(r.status, 200) << r.body;
  auto g = c.request("GET", "/v1/models", {}, client_authorization());
  EXPECT_EQ(g.status, 200) << g.body;
  auto seen = up.requests();
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& req : seen) {
    EXPECT_EQ(req.header("authorization"), "Bearer pool-token-1") << req.head;
    EXPECT_EQ(req.head.find("client-own-secret"), std::string::npos) << req.head;
  }
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(sluice->stderr_text().find("pool-token-1"), std::string::npos);
}

TEST(UpstreamCredential, AnEndpointsOwnFileOverridesThePools) {
  FakeUpstream up(answer_ok());
  TempFile pool("pool-token\n", "pool.token");
  TempFile own("endpoint-token  \r\n", "own.token");
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  upstreamCredentialFile: " + pool.path() +
      "\nendpoints:\n  - address: " + up.address() + "\n    credentialFile: " + own.path() + "\n");
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  auto seen = up.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].header("authorization"), "Bearer endpoint-token");
}

TEST(UpstreamCredential, AReloadReadsTheFileAgainAndABadOneKeepsTheRunningCredential) {
  FakeUpstream up(answer_ok());
  TempFile token("first-token\n", "engine.token");
  TempFile cfg(make_config({up.address()}, "  upstreamCredentialFile: " + token.path() + "\n"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  HttpClient admin(kHost, sluice->admin_port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  write_file_atomically(token.path(), "second-token\n");
  auto r = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find("second-token"), std::string::npos) << r.body;
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  // A file with a space in the token fails the reload, naming the file and
  // not quoting it; requests keep the running credential.
  write_file_atomically(token.path(), "third token\n");
  auto bad = admin.request("POST", "/admin/v1/reload");
  EXPECT_NE(bad.status, 200) << bad.body;
  EXPECT_NE(bad.body.find("engine.token"), std::string::npos) << bad.body;
  EXPECT_EQ(bad.body.find("third"), std::string::npos) << bad.body;
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  auto seen = up.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].header("authorization"), "Bearer first-token");
  EXPECT_EQ(seen[1].header("authorization"), "Bearer second-token");
  EXPECT_EQ(seen[2].header("authorization"), "Bearer second-token");
}

TEST(UpstreamCredential, AMissingFileAtStartupIsAConfigErrorNamingIt) {
  TempFile cfg(
      make_config({"127.0.0.1:9"}, "  upstreamCredentialFile: /nonexistent/engine.token\n"));
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"}, o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->wait(20000ms), 2);
  EXPECT_NE(p->stderr_text().find("/nonexistent/engine.token"), std::string::npos)
      << p->stderr_text();
}

TEST(UpstreamCredential, WithoutOneTheClientsAuthorizationPassesAsBefore) {
  FakeUpstream up(answer_ok());
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1), client_authorization()).status, 200);
  auto seen = up.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].header("authorization"), "Bearer client-own-secret");
}

}  // namespace
}  // namespace sluice::test
