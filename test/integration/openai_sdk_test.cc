// A real client: the OpenAI Node SDK (npm `openai`, installed into
// test/node by scripts/install-deps.sh) against sluice over HTTPS with a
// private CA and a sluice API key, not streaming and streaming, a wrong key
// (the SDK's AuthenticationError), the model list. Without node or the SDK:
// failed under make test, skipped elsewhere (support/requires.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "auth/api_keys.h"
#include "flow_control_harness.h"
#include "support/requires.h"
#include "support/tls_client.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::string dir_of(const TempFile& f) { return f.path().substr(0, f.path().rfind('/')); }

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
  std::string text;
  {
    std::FILE* f = std::fopen(out.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
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

}  // namespace
}  // namespace sluice::test
