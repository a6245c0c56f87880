// data-parallel-profile-handler (issue 40, item 3), after llm-d's
// profilehandler/dataparallel/dp_profile_handler.go: one profile picks a
// data-parallel rank; the request goes to the rank's host on primaryPort
// (default 8000) with `x-data-parallel-host-port: <rank host:port>`. In
// sluice the rank stays the target (its accounting), the result carries the
// port to connect to and the header's name, and the proxy writes the
// header's value for the endpoint it sends to.
#include <gtest/gtest.h>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/data_parallel_profile_handler.h"
#include "scheduling_test_util.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::unique_ptr<Scheduler> build(const std::string& yaml) {
  return build_scheduler(config::load_config_string(yaml, "test.yaml"));
}

std::string build_error(const std::string& yaml) {
  try {
    build(yaml);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// llm-d-router deploy/config/dp-epp-config.yaml, as published but with
// queue-scorer for its prefix-cache-scorer (the pick is then worked by hand
// from the queues alone).
std::string dp_config(const std::string& parameters) {
  return "plugins:\n"
         "- type: decode-filter\n"
         "- type: queue-scorer\n"
         "- type: max-score-picker\n"
         "- type: data-parallel-profile-handler\n" +
         parameters +
         "schedulingProfiles:\n"
         "- name: default\n"
         "  plugins:\n"
         "  - pluginRef: decode-filter\n"
         "  - pluginRef: max-score-picker\n"
         "  - pluginRef: queue-scorer\n"
         "    weight: 2\n";
}

// The result points into the endpoints' view: both live in `view`.
struct Scheduled {
  std::vector<Endpoint> view;
  SchedulingResult res;
};

const SchedulingResult& schedule(Scheduler& s, const Pool& pool, Scheduled& out) {
  out.view = pool.copy();
  Request r;
  r.input_tokens = 10;
  CycleState cycle;
  s.schedule(cycle, r, out.view, out.res);
  return out.res;
}

// Three ranks on two hosts, queues 3, 0 and 5. queue-scorer: (max - q) /
// (max - min) = 2/5, 1, 0; the picker takes the rank on 10.0.0.1:8002.
Pool three_ranks() {
  Pool pool;
  pool.add("10.0.0.1:8001").metrics.waiting_queue_size = 3;
  pool.add("10.0.0.1:8002").metrics.waiting_queue_size = 0;
  pool.add("10.0.0.2:8001").metrics.waiting_queue_size = 5;
  return pool;
}

TEST(DataParallelProfileHandler, TheRankStaysTheTargetAndTheHostsPrimaryPortIsTheConnection) {
  auto s = build(dp_config("  parameters:\n    primaryPort: 8000\n"));
  Pool pool = three_ranks();
  Scheduled run;
  const auto& res = schedule(*s, pool, run);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.primary_profile, "default");
  ASSERT_FALSE(res.targets.empty());
  EXPECT_EQ(res.targets[0]->address, "10.0.0.1:8002");  // accounted here
  ASSERT_EQ(res.serving.size(), 1u);
  EXPECT_EQ(res.serving[0]->address, "10.0.0.1:8002");
  EXPECT_EQ(res.upstream_port, 8000);
  EXPECT_EQ(res.rank_header, "x-data-parallel-host-port");
  // The value is the proxy's to write (per attempt): not a fixed header.
  EXPECT_TRUE(res.headers.empty());
}

TEST(DataParallelProfileHandler, PrimaryPortDefaultsTo8000) {
  auto s = build(dp_config(""));
  Pool pool = three_ranks();
  Scheduled run;
  const auto& res = schedule(*s, pool, run);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.upstream_port, 8000);
}

TEST(DataParallelProfileHandler, PrimaryPortBoundsAreAccepted) {
  for (int port : {1, 9000, 65535}) {
    auto s = build(dp_config("  parameters:\n    primaryPort: " + std::to_string(port) + "\n"));
    Pool pool = three_ranks();
    Scheduled run;
    const auto& res = schedule(*s, pool, run);
    ASSERT_TRUE(res.ok) << res.error;
    EXPECT_EQ(res.upstream_port, port);
  }
}

// llm-d accepts 0 and would send to port "0"; sluice keeps each rank's own
// port (upstream_port 0) and still names the rank in the header.
TEST(DataParallelProfileHandler, PrimaryPortZeroKeepsTheRanksOwnPort) {
  auto s = build(dp_config("  parameters:\n    primaryPort: 0\n"));
  Pool pool = three_ranks();
  Scheduled run;
  const auto& res = schedule(*s, pool, run);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.targets[0]->address, "10.0.0.1:8002");
  EXPECT_EQ(res.upstream_port, 0);
  EXPECT_EQ(res.rank_header, "x-data-parallel-host-port");
}

TEST(DataParallelProfileHandler, AnIpv6RankIsPickedAndWrittenInBrackets) {
  auto s = build(dp_config(""));
  Pool pool;
  pool.add("[fd00::1]:8001").metrics.waiting_queue_size = 4;
  pool.add("[fd00::2]:8003").metrics.waiting_queue_size = 1;
  Scheduled run;
  const auto& res = schedule(*s, pool, run);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.targets[0]->address, "[fd00::2]:8003");
  // What the proxy writes for that endpoint (host fd00::2, port 8003), and
  // the Host of the connection to its primary port.
  std::string value;
  DataParallelProfileHandler::append_rank_address(value, "fd00::2", 8003);
  EXPECT_EQ(value, "[fd00::2]:8003");
  std::string host;
  DataParallelProfileHandler::append_rank_address(host, "fd00::2", res.upstream_port);
  EXPECT_EQ(host, "[fd00::2]:8000");
}

TEST(DataParallelProfileHandler, RankAddressIsJoinedAsGoDoes) {
  std::string out = "x: ";
  DataParallelProfileHandler::append_rank_address(out, "10.0.0.1", 8002);
  EXPECT_EQ(out, "x: 10.0.0.1:8002");  // appended, not replaced
  out.clear();
  DataParallelProfileHandler::append_rank_address(out, "::1", 65535);
  EXPECT_EQ(out, "[::1]:65535");
  out.clear();
  DataParallelProfileHandler::append_rank_address(out, "rank-0.vllm.svc", 1);
  EXPECT_EQ(out, "rank-0.vllm.svc:1");
}

TEST(DataParallelProfileHandler, AProfileThatFindsNoRankIsTheAnswersError) {
  auto s = build(dp_config(""));
  Pool pool;
  pool.add("10.0.0.1:8001", {{"llm-d.ai/role", "prefill"}});  // decode-filter drops it
  Scheduled run;
  const auto& res = schedule(*s, pool, run);
  EXPECT_FALSE(res.ok);
  EXPECT_FALSE(res.error.empty());
}

// --- bad input: each a config error naming the plugin, the field, the line.

TEST(DataParallelProfileHandler, NegativePrimaryPortIsAConfigError) {
  const auto e = build_error(dp_config("  parameters:\n    primaryPort: -1\n"));
  EXPECT_NE(e.find("test.yaml:7: plugins[data-parallel-profile-handler].parameters.primaryPort: "
                   "must be between 1 and 65535 (or 0: each rank's own port), got -1"),
            std::string::npos)
      << e;
}

TEST(DataParallelProfileHandler, PrimaryPortAbove65535IsAConfigError) {
  const auto e = build_error(dp_config("  parameters:\n    primaryPort: 65536\n"));
  EXPECT_NE(e.find("test.yaml:7: plugins[data-parallel-profile-handler].parameters.primaryPort: "
                   "must be between 1 and 65535 (or 0: each rank's own port), got 65536"),
            std::string::npos)
      << e;
}

TEST(DataParallelProfileHandler, NonIntegerPrimaryPortIsAConfigError) {
  for (std::string v : {"8000.5", "eight-thousand", "[8000]"}) {
    const auto e = build_error(dp_config("  parameters:\n    primaryPort: " + v + "\n"));
    EXPECT_NE(e.find("test.yaml:7: plugins[data-parallel-profile-handler].parameters.primaryPort: "
                     "expected a whole number"),
              std::string::npos)
        << v << ": " << e;
  }
}

TEST(DataParallelProfileHandler, AnUnknownParameterIsAConfigError) {
  const auto e = build_error(dp_config("  parameters:\n    primaryPorts: 8000\n"));
  EXPECT_NE(e.find("test.yaml:7: plugins[data-parallel-profile-handler].parameters.primaryPorts: "
                   "unknown field"),
            std::string::npos)
      << e;
}

// llm-d logs an error per request and routes nothing; sluice refuses the
// config at load.
TEST(DataParallelProfileHandler, TwoProfilesAreAConfigErrorAtLoad) {
  const auto e = build_error(dp_config("") +
                             "- name: second\n"
                             "  plugins:\n"
                             "  - pluginRef: max-score-picker\n");
  EXPECT_NE(e.find("test.yaml:5: plugins[data-parallel-profile-handler]: "
                   "data-parallel-profile-handler runs one profile, but 2 are configured"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace sluice::scheduling
