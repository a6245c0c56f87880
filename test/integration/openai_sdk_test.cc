// A real client: the OpenAI Node SDK (npm `openai`, installed into
// test/node by scripts/install-deps.sh) against sluice over HTTPS with a
// private CA and a sluice API key, not streaming and streaming, a wrong key
// (the SDK's AuthenticationError), the model list. Without node or the SDK:
// failed under make test, skipped elsewhere (support/requires.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "auth/api_keys.h"
#include "flow_control_harness.h"
#include "support/requires.h"
#include "support/tls_client.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::string dir_of(const TempFile& f) { return f.path().substr(0, f.path().rfind('/')); }

// A file's whole text; nullopt if it cannot be opened.
std::optional<std::string> read_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return std::nullopt;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

TEST(OpenAiSdk, StreamingAndNotOverHttpsWithAnApiKey) {
  const std::string node_dir = SLUICE_NODE_DIR;
  SLUICE_REQUIRE(run_command("command -v node >/dev/null") == 0, "node",
                 "Debian packages nodejs and npm; scripts/install-deps.sh installs them");
  SLUICE_REQUIRE(run_command("test -f " + node_dir + "/node_modules/openai/package.json") == 0,
                 "the OpenAI Node SDK in " + node_dir, "scripts/install-deps.sh runs npm ci there");
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile work("", "sdk.out");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  auto key = auth::generate_key("acme", "key_sdk");
  ASSERT_TRUE(key);
  TempFile keys(auth::render_key_file({key->record}), "keys.yaml");
  TempFile cfg(make_config({mock->address()},
                           "  tls:\n    listen: 127.0.0.1:0\n"
                           "    certificateFile: " +
                               pki.server_cert() + "\n    keyFile: " + pki.server_key() + "\n") +
               "auth:\n  apiKeys: {file: " + keys.path() + "}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_NE(sluice->tls_port(), 0);
  const std::string out = dir_of(work) + "/sdk.json";
  const int code =
      run_command("cd " + node_dir +
                  " && SLUICE_BASE_URL=https://127.0.0.1:" + std::to_string(sluice->tls_port()) +
                  "/v1 SLUICE_API_KEY=" + key->key + " NODE_EXTRA_CA_CERTS=" + pki.ca() +
                  " timeout 60 node openai_sdk.mjs >" + out + " 2>&1");
  const auto read = read_text(out);
  ASSERT_TRUE(read) << out;
  const std::string& text = *read;
  ASSERT_EQ(code, 0) << text;
  const json r = json::parse(text.substr(0, text.find('\n')), nullptr, false);
  ASSERT_TRUE(r.is_object()) << text;
  EXPECT_FALSE(r["text"].get<std::string>().empty()) << text;
  EXPECT_GE(r["chunks"].get<int>(), 2) << text;  // a stream the SDK parsed event by event
  EXPECT_FALSE(r["streamed"].get<std::string>().empty()) << text;
  EXPECT_EQ(r["wrong_key"], "401 invalid_api_key") << text;
  EXPECT_EQ(r["models"], json::array({"mock-model"})) << text;
  EXPECT_EQ(sluice->stop(), 0);
}

// Quotas as the SDK meets them (issue 41): it retries a rate refusal when
// the retry-after-ms sluice sends says, and gets through; it does not retry
// insufficient_quota (x-should-retry: false). The access log shows each
// attempt sluice saw.
TEST(OpenAiSdk, RetriesARateRefusalAndNotASpentQuota) {
  const std::string node_dir = SLUICE_NODE_DIR;
  SLUICE_REQUIRE(run_command("command -v node >/dev/null") == 0, "node",
                 "Debian packages nodejs and npm; scripts/install-deps.sh installs them");
  SLUICE_REQUIRE(run_command("test -f " + node_dir + "/node_modules/openai/package.json") == 0,
                 "the OpenAI Node SDK in " + node_dir, "scripts/install-deps.sh runs npm ci there");
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile work("", "sdk.out");
  TempFile log("", "access.log");
  auto key = auth::generate_key("acme", "key_sdk");
  ASSERT_TRUE(key);
  TempFile keys(auth::render_key_file({key->record}), "keys.yaml");
  TempFile cfg(make_config({mock->address()}, "  accessLog: " + log.path() + "\n") +
               "auth:\n  apiKeys: {file: " + keys.path() +
               "}\n"
               "tenants:\n  - id: acme\n    quotas:\n"
               "      - {name: rpm, requests: 1, window: 2s}\n"
               "      - {name: tpm, tokens: 1000, window: 1m}\n");
  auto sluice = start_sluice(cfg);
  const std::string out = dir_of(work) + "/quota.json";
  const int code = run_command(
      "cd " + node_dir + " && SLUICE_BASE_URL=http://127.0.0.1:" + std::to_string(sluice->port()) +
      "/v1 SLUICE_API_KEY=" + key->key + " timeout 60 node openai_quota.mjs >" + out + " 2>&1");
  const auto read = read_text(out);
  ASSERT_TRUE(read) << out;
  const std::string& text = *read;
  ASSERT_EQ(code, 0) << text;
  const json r = json::parse(text.substr(0, text.find('\n')), nullptr, false);
  ASSERT_TRUE(r.is_object()) << text;
  EXPECT_EQ(r["first"], 1) << text;
  EXPECT_EQ(r["second"], 1) << text;          // through, after the SDK's own retry
  EXPECT_GE(r["second_ms"].get<int>(), 500);  // it waited as told (most of the 2 s window)
  EXPECT_EQ(r["too_large"], "429 insufficient_quota") << text;
  // What sluice saw: served, refused (rpm), served, refused once (tpm).
  EXPECT_EQ(sluice->stop(), 0);
  std::vector<json> lines;
  {
    const auto logged = read_text(log.path());
    ASSERT_TRUE(logged) << log.path();
    const std::string& all = *logged;
    for (std::size_t p = 0, e; (e = all.find('\n', p)) != std::string::npos; p = e + 1)
      if (e > p) lines.push_back(json::parse(all.substr(p, e - p)));
  }
  std::vector<std::string> seen;
  for (const auto& l : lines)
    if (l["path"] == "/v1/chat/completions")
      seen.push_back(l["status"].dump() + " " + l.value("quota", std::string()));
  EXPECT_EQ(seen, (std::vector<std::string>{"200 ", "429 rpm", "200 ", "429 tpm"})) << text;
}

}  // namespace
}  // namespace sluice::test
