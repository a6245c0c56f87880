// program-aware-fairness end to end: a band under it serves and /metrics
// shows llm-d's program_aware series for the programs that were served.
#include <gtest/gtest.h>

#include "flow_control_harness.h"

namespace sluice::test {
namespace {

TEST(ProgramAware, ServedProgramsShowInLlmDsMetrics) {
  auto mock = start_mock();
  ASSERT_TRUE(mock);
  TempFile cfg(make_config({mock->address()}) + R"(plugins:
  - type: program-aware-fairness
    parameters:
      lasHalfLifeSeconds: 0
featureGates: [flowControl]
flowControl:
  defaultPriorityBand:
    fairnessPolicyRef: program-aware-fairness
)");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient client(kHost, sluice->port());
  for (const char* id : {"prog-a", "prog-b", "prog-a"})
    ASSERT_EQ(client.post_json("/v1/completions", completion_body(2), flow(id)).status, 200);
  // Each request: its input estimate at dispatch, then 2 x its 2 output
  // tokens: prog-a has twice prog-b's service, once both completions are in.
  const std::string a = R"(llm_d_epp_program_aware_attained_service_tokens{program_id="prog-a"})";
  const std::string b = R"(llm_d_epp_program_aware_attained_service_tokens{program_id="prog-b"})";
  ASSERT_TRUE(eventually([&] {
    const double va = scrape_metric(kHost, sluice->admin_port(), a);
    const double vb = scrape_metric(kHost, sluice->admin_port(), b);
    return vb >= 4 && va == 2 * vb;
  }));
  EXPECT_GE(
      scrape_metric(kHost, sluice->admin_port(),
                    R"(llm_d_epp_program_aware_avg_wait_time_milliseconds{program_id="prog-a"})"),
      0);
  const double jain =
      scrape_metric(kHost, sluice->admin_port(), "llm_d_epp_program_aware_jains_fairness_index");
  EXPECT_GT(jain, 0);
  EXPECT_LE(jain, 1);
}

}  // namespace
}  // namespace sluice::test
