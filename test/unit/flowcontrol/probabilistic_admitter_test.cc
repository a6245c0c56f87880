// probabilistic-admitter against llm-d's definition
// (pkg/epp/framework/plugins/requestcontrol/admitter/probabilisticadmitter):
// sheddable requests (priority < 0) are refused with probability
// min(saturation^power * k, 1), saturation = mean over endpoints of
// max(waiting / queueDepthThreshold, kv / kvCacheUtilThreshold), an endpoint
// without metrics counting 1. The rates are checked over many seeded draws
// within a stated binomial tolerance; the expected values are worked by hand.
#include "flowcontrol/probabilistic_admitter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/from_config.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {
namespace {

EndpointLoad load(double waiting, double kv) {
  EndpointLoad e;
  e.has_metrics = true;
  e.waiting = waiting;
  e.kv_cache_usage = kv;
  return e;
}

// How many of `trials` sheddable requests (priority -1) the admitter refuses.
int shed_count(ProbabilisticAdmitter& a, const std::vector<EndpointLoad>& pool,
               const std::vector<std::uint8_t>& gone, int trials) {
  int shed = 0;
  for (int i = 0; i < trials; ++i) shed += a.admit(-1, pool, gone) ? 0 : 1;
  return shed;
}

TEST(ProbabilisticAdmitter, SaturationIsTheMeanOfEachEndpointsLargerRatio) {
  ProbabilisticAdmitter a(ProbabilisticAdmitterParams{}, std::uint64_t{1});
  // Defaults qd 5, kv 0.8: max(1/5, 0.1/0.8) = 0.2; max(0/5, 0.16/0.8) = 0.2;
  // no metrics: 1.0. Mean of the three: 1.4 / 3.
  std::vector<EndpointLoad> pool = {load(1, 0.1), load(0, 0.16), EndpointLoad{}};
  EXPECT_NEAR(a.saturation(pool, std::vector<std::uint8_t>(3, 0)), 1.4 / 3, 1e-12);
  // An endpoint gone from the pool does not count: (0.2 + 0.2) / 2.
  EXPECT_NEAR(a.saturation(pool, std::vector<std::uint8_t>{0, 0, 1}), 0.2, 1e-12);
  // Nothing counts: none (-1), and the request is admitted.
  EXPECT_EQ(a.saturation(pool, std::vector<std::uint8_t>{1, 1, 1}), -1.0);
  EXPECT_TRUE(a.admit(-5, pool, std::vector<std::uint8_t>{1, 1, 1}));
}

TEST(ProbabilisticAdmitter, ShedProbabilityFollowsLlmDsCurve) {
  ProbabilisticAdmitter a(ProbabilisticAdmitterParams{}, std::uint64_t{1});
  // llm-d's README table with power 5, k 300: 0.2^5 * 300 = 0.096;
  // 0.15^5 * 300 = 0.0227812...; 0.3^5 * 300 = 0.729; 0.35^5 * 300 > 1.
  EXPECT_NEAR(a.shed_probability(0.2), 0.096, 1e-12);
  EXPECT_NEAR(a.shed_probability(0.15), 0.0227812, 1e-7);
  EXPECT_NEAR(a.shed_probability(0.3), 0.729, 1e-12);
  EXPECT_EQ(a.shed_probability(0.35), 1.0);
  EXPECT_EQ(a.shed_probability(0.0), 0.0);
}

// 20 000 draws at each rate; the count must be within 5 standard deviations
// of n p (sd = sqrt(n p (1 - p))): a fair coin of that rate falls outside
// with probability below 6e-7, and the RNG is seeded, so the test is
// deterministic.
constexpr int kTrials = 20000;

TEST(ProbabilisticAdmitter, ShedsAtTheDefaultCurvesRate) {
  ProbabilisticAdmitter a(ProbabilisticAdmitterParams{}, std::uint64_t{42});
  // Saturation 0.2 (as above): p = 0.096, n p = 1920, sd = 41.66, 5 sd = 208.
  const std::vector<EndpointLoad> pool = {load(1, 0.1), load(0, 0.16)};
  const int shed = shed_count(a, pool, {0, 0}, kTrials);
  EXPECT_GE(shed, 1920 - 208);
  EXPECT_LE(shed, 1920 + 208);
}

TEST(ProbabilisticAdmitter, ShedsAtAConfiguredRate) {
  ProbabilisticAdmitterParams params;
  params.power = 2;
  params.k = 4;
  ProbabilisticAdmitter a(params, std::uint64_t{7});
  // One endpoint without metrics (1.0), three idle (0): saturation 0.25; the
  // fifth endpoint, gone, would add 20 and is not counted.
  // p = 0.25^2 * 4 = 0.25: n p = 5000, sd = sqrt(3750) = 61.24, 5 sd = 306.
  const std::vector<EndpointLoad> pool = {EndpointLoad{}, load(0, 0), load(0, 0), load(0, 0),
                                          load(100, 1)};
  const int shed = shed_count(a, pool, {0, 0, 0, 0, 1}, kTrials);
  EXPECT_GE(shed, 5000 - 306);
  EXPECT_LE(shed, 5000 + 306);
}

TEST(ProbabilisticAdmitter, PastTheCurvesEndEverySheddableRequestIsShedAndNoOtherEver) {
  ProbabilisticAdmitter a(ProbabilisticAdmitterParams{}, std::uint64_t{3});
  // Saturation 2 (waiting 10 of 5): p = 1.
  const std::vector<EndpointLoad> full = {load(10, 0)};
  EXPECT_EQ(shed_count(a, full, {0}, 1000), 1000);
  for (int priority : {0, 1, 100})
    for (int i = 0; i < 1000; ++i)
      ASSERT_TRUE(a.admit(priority, full, std::vector<std::uint8_t>{0}));
  // An idle pool: p = 0, nothing shed.
  EXPECT_EQ(shed_count(a, {load(0, 0)}, {0}, 1000), 0);
}

TEST(ProbabilisticAdmitter, ADrawBelowTheProbabilitySheds) {
  std::vector<double> draws = {0.2499, 0.25, 0.0, 0.9};
  std::size_t next = 0;
  ProbabilisticAdmitterParams params;
  params.power = 1;
  params.k = 1;
  ProbabilisticAdmitter a(params, [&] { return draws[next++]; });
  // waiting 1.25 of 5: saturation 0.25, p = 0.25 (power 1, k 1).
  const std::vector<EndpointLoad> pool = {load(1.25, 0)};
  const std::vector<std::uint8_t> gone = {0};
  EXPECT_FALSE(a.admit(-1, pool, gone));  // 0.2499 < 0.25
  EXPECT_TRUE(a.admit(-1, pool, gone));   // 0.25 is not below
  EXPECT_TRUE(a.admit(0, pool, gone));    // protected: no draw taken
  EXPECT_FALSE(a.admit(-1, pool, gone));  // 0.0
  EXPECT_EQ(next, 3u);
}

// In the controller: a refused request ends rejected-capacity (429) at once
// and takes no queue slot; a protected one is queued.
TEST(ProbabilisticAdmitter, TheControllerAnswersARefusalWithRejectedCapacity) {
  std::vector<Decision> decisions;
  Controller c(ControllerConfig{},
               std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 1, 1000000, 0}),
               [&](const Decision& d) { decisions.push_back(d); });
  c.set_endpoints({EndpointIdentity{"127.0.0.1:1"}});
  std::vector<std::unique_ptr<Admitter>> admitters;
  admitters.push_back(
      std::make_unique<ProbabilisticAdmitter>(ProbabilisticAdmitterParams{}, std::uint64_t{1}));
  c.set_admitters(std::move(admitters));
  EndpointMetrics m;
  m.waiting_queue_size = 10;  // saturation 2: every sheddable request is shed
  c.update_metrics(0, m, TimePoint{});
  EnqueueRequest r;
  r.cookie = 1;
  r.priority = -1;
  EXPECT_EQ(c.enqueue(r, TimePoint{}), 0u);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].cookie, 1u);
  EXPECT_EQ(decisions[0].outcome, QueueOutcome::kRejectedCapacity);
  r.cookie = 2;
  r.priority = 0;
  EXPECT_NE(c.enqueue(r, TimePoint{}), 0u);
  EXPECT_EQ(decisions.size(), 1u);
}

// ---------------------------------------------------------------- config

std::string config_with(const std::string& parameters) {
  return "plugins:\n- type: probabilistic-admitter\n  parameters:\n" + parameters;
}

void expect_config_error(const std::string& parameters, const std::string& field,
                         const std::string& line, const std::string& message) {
  auto c = config::load_config_string(config_with(parameters), "test.yaml");
  try {
    make_admitters(c);
    FAIL() << "accepted " << parameters;
  } catch (const config::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.yaml:" + line + ": plugins[probabilistic-admitter].parameters." +
                        field + ": " + message),
              std::string::npos)
        << what;
  }
}

TEST(ProbabilisticAdmitterConfig, DefaultsAreLlmDs) {
  auto c = config::load_config_string("plugins:\n- type: probabilistic-admitter\n", "test.yaml");
  auto admitters = make_admitters(c);
  ASSERT_EQ(admitters.size(), 1u);
  auto* a = dynamic_cast<ProbabilisticAdmitter*>(admitters[0].get());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->params().queue_depth_threshold, 5);
  EXPECT_EQ(a->params().kv_cache_util_threshold, 0.8);
  EXPECT_EQ(a->params().power, 5);
  EXPECT_EQ(a->params().k, 300);
}

// llm-d's example, deploy/config/probabilistic-admitter-epp-config.yaml.
TEST(ProbabilisticAdmitterConfig, LlmDsExampleConfigLoads) {
  auto c = config::load_config_string(R"(apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: probabilistic-admitter
- type: random-picker
- type: utilization-detector
  parameters:
    queueDepthThreshold: 999999999
    kvCacheUtilThreshold: 1.0
flowControl:
  saturationDetector:
    pluginRef: utilization-detector
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: random-picker
)",
                                      "test.yaml");
  auto admitters = make_admitters(c);
  ASSERT_EQ(admitters.size(), 1u);
  EXPECT_EQ(admitters[0]->type(), "probabilistic-admitter");
}

TEST(ProbabilisticAdmitterConfig, ParametersAreRead) {
  auto c = config::load_config_string(
      config_with("    queueDepthThreshold: 8\n    kvCacheUtilThreshold: 0.9\n    power: 2.5\n"
                  "    k: 1000\n"),
      "test.yaml");
  auto admitters = make_admitters(c);
  auto* a = dynamic_cast<ProbabilisticAdmitter*>(admitters.at(0).get());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->params().queue_depth_threshold, 8);
  EXPECT_EQ(a->params().kv_cache_util_threshold, 0.9);
  EXPECT_EQ(a->params().power, 2.5);
  EXPECT_EQ(a->params().k, 1000);
}

TEST(ProbabilisticAdmitterConfig, AZeroQueueDepthThresholdIsAnError) {
  expect_config_error("    queueDepthThreshold: 0\n", "queueDepthThreshold", "4",
                      "must be greater than zero");
}

TEST(ProbabilisticAdmitterConfig, AFractionalQueueDepthThresholdIsAnError) {
  // llm-d's parameter is an integer.
  expect_config_error("    queueDepthThreshold: 2.5\n", "queueDepthThreshold", "4", "");
}

TEST(ProbabilisticAdmitterConfig, AZeroKvCacheUtilThresholdIsAnError) {
  expect_config_error("    kvCacheUtilThreshold: 0\n", "kvCacheUtilThreshold", "4",
                      "must be in (0, 1]");
}

TEST(ProbabilisticAdmitterConfig, AKvCacheUtilThresholdAboveOneIsAnError) {
  expect_config_error("    power: 3\n    kvCacheUtilThreshold: 1.5\n", "kvCacheUtilThreshold", "5",
                      "must be in (0, 1]");
}

TEST(ProbabilisticAdmitterConfig, ANegativePowerIsAnError) {
  expect_config_error("    power: -1\n", "power", "4", "must be greater than zero");
}

TEST(ProbabilisticAdmitterConfig, AZeroKIsAnError) {
  expect_config_error("    k: 0\n", "k", "4", "must be greater than zero");
}

TEST(ProbabilisticAdmitterConfig, AnUnknownParameterIsAnError) {
  expect_config_error("    threshold: 3\n", "threshold", "4", "");
}

}  // namespace
}  // namespace sluice::flowcontrol
