// agent-identity's parameters (llm-d's requestheader/agentidentity):
// additionalSessionHeaders first, lower-cased, then llm-d's built-in list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"

namespace sluice::config {
namespace {

const std::vector<std::string> kDefaults = {"x-claude-code-session-id", "x-session-affinity",
                                            "session-id", "session_id"};

std::string error_of(const std::string& parameters) {
  try {
    load_config_string("plugins:\n- type: agent-identity\n  parameters:\n" + parameters,
                       "test.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AgentIdentityConfig, WithoutThePluginNoHeaderIsRead) {
  EXPECT_TRUE(load_config_string("", "test.yaml").agent_session_headers.empty());
}

TEST(AgentIdentityConfig, LlmDsHeadersInLlmDsOrder) {
  auto c = load_config_string("plugins:\n- type: agent-identity\n", "test.yaml");
  EXPECT_EQ(c.agent_session_headers, kDefaults);
}

TEST(AgentIdentityConfig, AdditionalHeadersComeFirstInLowerCase) {
  auto c = load_config_string(
      "plugins:\n- type: agent-identity\n  parameters:\n"
      "    additionalSessionHeaders: [X-My-Agent, x-other]\n",
      "test.yaml");
  std::vector<std::string> want = {"x-my-agent", "x-other"};
  want.insert(want.end(), kDefaults.begin(), kDefaults.end());
  EXPECT_EQ(c.agent_session_headers, want);
}

TEST(AgentIdentityConfig, ANameThatIsNoHeaderNameIsAnError) {
  EXPECT_EQ(error_of("    additionalSessionHeaders: [ok, \"bad name\"]\n"),
            "test.yaml:4: plugins[agent-identity].parameters.additionalSessionHeaders[1]: not a "
            "header name");
}

TEST(AgentIdentityConfig, NotAListIsAnError) {
  EXPECT_EQ(error_of("    additionalSessionHeaders: x-one\n"),
            "test.yaml:4: plugins[agent-identity].parameters.additionalSessionHeaders: expected "
            "a list of header names");
}

TEST(AgentIdentityConfig, MoreThan32NamesIsAnError) {
  std::string list;
  for (int i = 0; i < 33; ++i) list += (i ? ", h" : "h") + std::to_string(i);
  EXPECT_EQ(error_of("    additionalSessionHeaders: [" + list + "]\n"),
            "test.yaml:4: plugins[agent-identity].parameters.additionalSessionHeaders: at most 32 "
            "header names");
}

TEST(AgentIdentityConfig, AnUnknownParameterIsAnError) {
  EXPECT_EQ(error_of("    sessionHeaders: [x]\n"),
            "test.yaml:4: plugins[agent-identity].parameters.sessionHeaders: unknown field");
}

}  // namespace
}  // namespace sluice::config
