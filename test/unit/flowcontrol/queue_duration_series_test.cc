// The controller's queue-duration series (GIE's
// inference_extension_flow_control_request_queue_duration_seconds): one per
// fairness id while fewer than the configured number of ids have one, then
// "other"; a flow's dispatched series is looked up once and cached on the
// flow, so the cache must follow a change of that number.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {
namespace {

struct Fixture {
  Fixture() {
    ControllerConfig cfg;
    cfg.registry.default_band.fairness = "vtc-fairness-policy";
    controller = std::make_unique<Controller>(
        cfg, std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 1, 1000000, 0}),
        [this](const Decision& d) {
          if (d.outcome == QueueOutcome::kDispatched) dispatched.push_back(d.ticket);
        });
    controller->set_endpoint_count(1);
  }
  // One request of `id`, dispatched at once (one slot, freed first).
  void serve(const std::string& id) {
    EnqueueRequest r;
    r.flow_id = id;
    r.bytes = 10;
    controller->enqueue(r, now);
    controller->dispatch(now);
    ASSERT_FALSE(dispatched.empty());
    controller->complete(dispatched.back(), 1, now);
    dispatched.clear();
  }
  std::uint64_t count(const std::string& label) const {
    std::uint64_t n = 0;
    for (const auto& s : controller->queue_durations())
      if (s.fairness_id == label && s.outcome == QueueOutcome::kDispatched)
        n += s.histogram.count();
    return n;
  }
  std::unique_ptr<Controller> controller;
  std::vector<std::uint64_t> dispatched;
  TimePoint now{};
};

TEST(QueueDurationSeries, OwnSeriesUpToTheLimitThenOtherAndTheCacheFollowsTheLimit) {
  Fixture f;
  f.controller->set_metrics_max_flows(1);
  for (int i = 0; i < 3; ++i) f.serve("a");
  for (int i = 0; i < 2; ++i) f.serve("b");
  EXPECT_EQ(f.count("a"), 3u);
  EXPECT_EQ(f.count("b"), 0u);
  EXPECT_EQ(f.count("other"), 2u);
  // More ids may have their own series now: b's flow (still the same flow
  // object, its series cached as "other") gets its own from here on.
  f.controller->set_metrics_max_flows(10);
  for (int i = 0; i < 4; ++i) f.serve("b");
  f.serve("a");
  EXPECT_EQ(f.count("b"), 4u);
  EXPECT_EQ(f.count("other"), 2u);
  EXPECT_EQ(f.count("a"), 4u);
}

}  // namespace
}  // namespace sluice::flowcontrol
