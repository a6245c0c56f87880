// llm-d's configurations as it publishes them today (issue 40): every
// fixture in test/fixtures/llmd/ (the shapes of llm-d's guides, its
// deploy/config/ files, its chart's defaults and its integration data)
// either serves a chat completion and a stream through sluice, or fails to
// start naming each llm-d plugin type sluice does not build — what its
// second line says.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/harness.h"
#include "support/fixture_text.h"
#include "support/http_client.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;
constexpr const char* kHost = "127.0.0.1";

std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(SLUICE_LLMD_FIXTURES_DIR))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

using test_support::read_text;

// "# expect: serve" or "# expect: refused TYPE ...": the types, or none.
bool expects_refusal(const std::string& text, std::vector<std::string>& types) {
  const auto at = text.find("# expect: ");
  if (at == std::string::npos) return false;
  std::istringstream line(text.substr(at + 10, text.find('\n', at) - at - 10));
  std::string word;
  line >> word;
  if (word != "refused") return false;
  while (line >> word) types.push_back(word);
  return true;
}

class LlmdGuide : public ::testing::TestWithParam<std::string> {};

TEST_P(LlmdGuide, ServesAsItsShapeSaysOrNamesWhatItLacks) {
  const std::string text =
      read_text(std::string(SLUICE_LLMD_FIXTURES_DIR) + "/" + GetParam() + ".yaml");
  ASSERT_FALSE(text.empty());
  std::vector<std::string> missing;
  const bool refused = expects_refusal(text, missing);
  ASSERT_NE(text.find("# expect: "), std::string::npos) << "no '# expect:' line";
  auto decode = start_mock({"--decode-ms-per-token", "1"});
  auto prefill = start_mock({"--decode-ms-per-token", "1"});
  // Two endpoints as the P/D and topology shapes want them: one decode, one
  // prefill, in one zone.
  const std::string endpoints =
      "endpoints:\n"
      "- address: " +
      decode->address() +
      "\n  labels: {llm-d.ai/role: decode, topology.kubernetes.io/zone: a}\n"
      "- address: " +
      prefill->address() + "\n  labels: {llm-d.ai/role: prefill, topology.kubernetes.io/zone: a}\n";
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 1\n" + text + endpoints);
  if (refused) {
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    auto p =
        Process::start({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"}, o);
    ASSERT_TRUE(p);
    EXPECT_NE(p->wait(20000ms), 0);
    const std::string err = p->stderr_text();
    EXPECT_NE(err.find(std::to_string(missing.size()) + " llm-d plugin type"), std::string::npos)
        << err;
    for (const auto& t : missing)
      EXPECT_NE(err.find(": " + t + " needs "), std::string::npos) << t << "\n" << err;
    return;
  }
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(sluice) << "did not start";
  HttpClient client(kHost, sluice->port(), 10000ms);
  const std::string body =
      R"({"model":"mock-model","messages":[{"role":"user","content":"hello from a guide"}],)"
      R"("max_tokens":3})";
  auto r = client.post_json("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body << "\n" << sluice->stderr_now();
  EXPECT_NE(r.body.find("chat.completion"), std::string::npos) << r.body;
  auto s = client.stream("/v1/chat/completions",
                         R"({"model":"mock-model","messages":[{"role":"user","content":"again"}],)"
                         R"("max_tokens":3,"stream":true})");
  ASSERT_TRUE(s.complete) << s.error;
  EXPECT_EQ(s.head.status, 200);
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.back().data, "[DONE]");
  EXPECT_TRUE(sluice->running());
  EXPECT_EQ(sluice->stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlmdGuide, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace sluice::test
