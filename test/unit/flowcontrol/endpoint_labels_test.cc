// Label-reading plugins keep what they derive from an endpoint's labels by
// slot until Endpoint::labels_version changes. The pool's writer,
// Controller::set_endpoints, must change it whenever labels change: else a
// filter keeps routing by the labels an endpoint had.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"
#include "scheduling/from_config.h"

namespace sluice::flowcontrol {
namespace {

TEST(EndpointLabels, AChangedRoleReachesTheFilterThatCachedTheOldOne) {
  ControllerConfig cfg;
  std::vector<int> chosen;  // the endpoint slot of each dispatch
  std::vector<std::uint64_t> tickets;
  Controller c(cfg,
               std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 100, 1000000, 0}),
               [&](const Decision& d) {
                 if (d.outcome != QueueOutcome::kDispatched) return;
                 chosen.push_back(d.endpoint);
                 tickets.push_back(d.ticket);
               });
  // prefill-filter keeps endpoints whose llm-d.ai/role serves prefill and
  // drops those without one.
  c.set_scheduler(scheduling::build_scheduler(config::load_config_string(
      "plugins:\n- type: prefill-filter\n- type: max-score-picker\n"
      "schedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: prefill-filter\n"
      "  - pluginRef: max-score-picker\n",
      "test")));
  std::vector<EndpointIdentity> pool(2);
  pool[0].address = "127.0.0.1:1";
  pool[0].labels["llm-d.ai/role"] = "prefill";
  pool[1].address = "127.0.0.1:2";
  pool[1].labels["llm-d.ai/role"] = "decode";
  c.set_endpoints(pool);
  const TimePoint t0{};
  auto send = [&](std::uint64_t cookie) {
    EnqueueRequest r;
    r.cookie = cookie;
    r.flow_id = "f";
    r.bytes = 10;
    r.input_tokens = 10;
    ASSERT_NE(c.enqueue(std::move(r), t0), 0u);
    c.dispatch(t0);
  };
  send(1);
  send(2);
  ASSERT_EQ(chosen, (std::vector<int>{0, 0}));  // only slot 0 serves prefill
  // The roles swap: the filter, which read slot 0's and 1's roles already,
  // must read them again.
  pool[0].labels["llm-d.ai/role"] = "decode";
  pool[1].labels["llm-d.ai/role"] = "prefill";
  c.set_endpoints(pool);
  send(3);
  send(4);
  EXPECT_EQ(chosen, (std::vector<int>{0, 0, 1, 1}));
  // The same labels again change nothing (and keep what was derived).
  c.set_endpoints(pool);
  send(5);
  EXPECT_EQ(chosen.back(), 1);
  for (const std::uint64_t t : tickets) c.complete(t, 1, t0);
}

}  // namespace
}  // namespace sluice::flowcontrol
