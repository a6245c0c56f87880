// agent-identity end to end: an agent's session header names the flow of a
// request that names none, only where steering headers are believed (auth
// off, or a trusted proxy's request under no tenant policy), and never over
// an authenticated tenant's flow. The flow each request was charged to is
// read from the access log (one line per request, in order) and from
// /admin/v1/flows.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "flow_control_harness.h"
#include "key_harness.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

class AgentIdentity : public ::testing::Test {
 protected:
  void start(const std::string& extra) {
    mock_ = start_mock();
    log_ = std::make_unique<TempFile>("", "access.log");
    cfg_ = std::make_unique<TempFile>(
        make_config({mock_->address()}, "  accessLog: " + log_->path() + "\n") + extra);
    sluice_ = start_sluice(*cfg_);
    ASSERT_TRUE(sluice_);
  }
  int post(const Headers& h) {
    HttpClient c(kHost, sluice_->port());
    return c.post_json("/v1/completions", completion_body(2), h).status;
  }
  // The flows of the first `n` requests, from the access log.
  std::vector<std::string> flows(std::size_t n) {
    std::vector<std::string> out;
    eventually([&] {
      out.clear();
      std::ifstream in(log_->path());
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(json::parse(line).value("flow", ""));
      return out.size() >= n;
    });
    return out;
  }
  std::set<std::string> admin_flows() {
    HttpClient admin(kHost, sluice_->admin_port());
    auto body = json::parse(admin.request("GET", "/admin/v1/flows").body, nullptr, false);
    std::set<std::string> ids;
    if (!body.is_discarded())
      for (const auto& f : body) ids.insert(f.value("id", ""));
    return ids;
  }

  std::unique_ptr<Process> mock_, sluice_;
  std::unique_ptr<TempFile> log_, cfg_, keys_;
};

constexpr const char* kPlugin = R"(plugins:
  - type: agent-identity
    parameters:
      additionalSessionHeaders: [X-My-Agent]
)";

TEST_F(AgentIdentity, WithAuthOffTheSessionHeaderNamesTheFlow) {
  start(kPlugin);
  EXPECT_EQ(post({{"x-claude-code-session-id", "claude-1"}}), 200);
  // The additional header is looked at first, then llm-d's list in order.
  EXPECT_EQ(post({{"x-session-affinity", "open-1"}, {"x-my-agent", "mine-1"}}), 200);
  EXPECT_EQ(post({{"session_id", "codex-old"}, {"session-id", "codex-1"}}), 200);
  // An explicit fairness id wins.
  Headers h = flow("explicit");
  h.emplace_back("x-claude-code-session-id", "claude-1");
  EXPECT_EQ(post(h), 200);
  // No session header, or one that is not a valid flow id: default-flow,
  // and the request is served.
  EXPECT_EQ(post({}), 200);
  EXPECT_EQ(post({{"x-session-affinity", "has spaces"}}), 200);
  EXPECT_EQ(flows(6), (std::vector<std::string>{"claude-1", "mine-1", "codex-1", "explicit",
                                                "default-flow", "default-flow"}));
  const auto ids = admin_flows();
  for (const char* id : {"claude-1", "mine-1", "codex-1", "explicit", "default-flow"})
    EXPECT_TRUE(ids.count(id)) << id;
  EXPECT_FALSE(ids.count("open-1"));
}

TEST_F(AgentIdentity, WithoutThePluginSessionHeadersAreNotAFlow) {
  start("");
  EXPECT_EQ(post({{"x-claude-code-session-id", "claude-1"}}), 200);
  EXPECT_EQ(flows(1), (std::vector<std::string>{"default-flow"}));
}

TEST_F(AgentIdentity, FromATrustedProxyTheSessionHeaderNamesTheFlowNotTheTenant) {
  start(std::string(kPlugin) + R"(auth:
  trustedProxies: [127.0.0.1/32]
tenants:
  - id: acme
    models: [mock-model]
    subflows: [ui]
)");
  // No tenant named by the proxy, and no policy for default-flow: the
  // session's flow. A session that names a tenant ("acme/ui", acme's
  // sub-flow) is ignored: it does not get into acme's flows.
  EXPECT_EQ(post({{"x-session-affinity", "sess-2"}}), 200);
  EXPECT_EQ(post({{"x-session-affinity", "acme"}, {"x-my-agent", "acme/ui"}}), 200);
  // The proxy named acme: acme's policy and flow, whatever the session.
  Headers h = flow("acme");
  h.emplace_back("x-session-affinity", "sess-3");
  EXPECT_EQ(post(h), 200);
  const auto f = flows(3);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], "sess-2");
  EXPECT_EQ(f[1], "default-flow");
  EXPECT_EQ(f[2], "acme");
  EXPECT_TRUE(admin_flows().count("sess-2"));
}

TEST_F(AgentIdentity, AnApiKeysTenantKeepsItsFlowWhateverTheSessionHeaderSays) {
  Key acme = make_key("acme", "key_acme");
  keys_ = std::make_unique<TempFile>(auth::render_key_file({acme.record}), "keys.yaml");
  start(std::string(kPlugin) + "auth:\n  apiKeys: {file: " + keys_->path() +
        "}\ntenants:\n  - id: acme\n    subflows: [ui]\n");
  EXPECT_EQ(post(bearer(acme.secret, {{"x-claude-code-session-id", "beta"}})), 200);
  EXPECT_EQ(post(bearer(acme.secret, {{"x-my-agent", "ui"}})), 200);
  // Without a key the header does not get a request in either.
  EXPECT_EQ(post({{"x-claude-code-session-id", "beta"}}), 401);
  const auto f = flows(3);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], "acme");
  EXPECT_EQ(f[1], "acme");
  const auto ids = admin_flows();
  EXPECT_TRUE(ids.count("acme"));
  EXPECT_FALSE(ids.count("beta"));
  EXPECT_FALSE(ids.count("ui"));
  EXPECT_FALSE(ids.count("acme/ui"));
}

}  // namespace
}  // namespace sluice::test
