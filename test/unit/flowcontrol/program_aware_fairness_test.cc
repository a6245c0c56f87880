// program-aware-fairness against llm-d's definition
// (pkg/epp/framework/plugins/flowcontrol/fairness/program-aware, strategy
// las): attained service = input + 2 x output tokens, halved every
// lasHalfLifeSeconds; score = lasWeightService x (1 - norm(service)) +
// lasWeightHeadWait x norm(head wait), norm over the backlogged flows (0.5
// when all are equal). Every expected pick and number below is worked by
// hand in the comment beside it; time is a fake clock.
#include "flowcontrol/program_aware_fairness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/from_config.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {
namespace {

using namespace std::chrono_literals;

struct FakeFlow final : FlowView {
  FakeFlow(std::string id, std::uint32_t s) : key_{std::move(id), 0}, slot_(s) {}
  const FlowKey& key() const override { return key_; }
  double weight() const override { return 1; }
  std::size_t queued() const override { return queue.size(); }
  const QueuedRequest* head() const override { return queue.empty() ? nullptr : &queue.front(); }
  std::uint32_t slot() const override { return slot_; }
  FlowKey key_;
  std::uint32_t slot_;
  std::deque<QueuedRequest> queue;
};

class ProgramAware : public ::testing::Test {
 protected:
  TimePoint now_{};
  std::uint64_t sequence_ = 0;
  std::deque<FakeFlow> flows_;

  std::unique_ptr<ProgramAwareFairness> policy(ProgramAwareParams p = {}) {
    return std::make_unique<ProgramAwareFairness>(p, [this] { return now_; });
  }
  void at(Duration d) { now_ = TimePoint{} + d; }
  FakeFlow& flow(const std::string& id) {
    flows_.emplace_back(id, static_cast<std::uint32_t>(flows_.size()));
    return flows_.back();
  }
  // Queues a request in `f` now (backlogging it if it was empty).
  void queue(FairnessPolicy& p, FakeFlow& f, std::uint64_t input_tokens = 0) {
    QueuedRequest r;
    r.sequence = ++sequence_;
    r.enqueued = now_;
    r.input_tokens = input_tokens;
    f.queue.push_back(r);
    if (f.queue.size() == 1) p.on_backlogged(f);
  }
  // Dispatches `f`'s head, streams `output` tokens and completes it, now.
  void serve(FairnessPolicy& p, FakeFlow& f, std::uint64_t output) {
    QueuedRequest r = f.queue.front();
    f.queue.pop_front();
    if (f.queue.empty()) p.on_idle(f);
    p.on_dispatched(f, r);
    if (output) p.on_output_tokens(f, output);
    p.on_completed(f);
  }
};

TEST_F(ProgramAware, ThePickIsTheProgramWithTheLeastAttainedService) {
  auto p = policy();
  FakeFlow& a = flow("a");
  FakeFlow& b = flow("b");
  FakeFlow& c = flow("c");
  at(0s);
  queue(*p, a, 100);
  serve(*p, a, 50);  // a: 100 + 2 x 50 = 200
  queue(*p, b, 300);
  serve(*p, b, 0);  // b: 300
  EXPECT_DOUBLE_EQ(p->attained_service("a"), 200);
  EXPECT_DOUBLE_EQ(p->attained_service("b"), 300);
  at(60s);  // one half-life: a 100, b 150
  EXPECT_DOUBLE_EQ(p->attained_service("a"), 100);
  EXPECT_DOUBLE_EQ(p->attained_service("b"), 150);
  queue(*p, a);
  queue(*p, b);
  queue(*p, c);  // c: 0
  // Heads all enqueued now: head wait 0.5 each (0.2 x 0.5 = 0.1).
  // Service over [0, 150]: a 0.8 x (1 - 100/150) + 0.1 = 0.3667,
  // b 0.8 x 0 + 0.1 = 0.1, c 0.8 x 1 + 0.1 = 0.9: c.
  EXPECT_EQ(p->pick(), &c);
  c.queue.clear();
  p->on_idle(c);
  // a over [100, 150]: 0.9; b 0.1: a.
  EXPECT_EQ(p->pick(), &a);
}

TEST_F(ProgramAware, DecayLetsAProgramServedLongAgoGoFirst) {
  for (double half_life : {60.0, 0.0}) {
    SCOPED_TRACE(half_life);
    flows_.clear();
    ProgramAwareParams params;
    params.half_life_seconds = half_life;
    auto p = policy(params);
    FakeFlow& a = flow("a");
    FakeFlow& b = flow("b");
    at(0s);
    queue(*p, b, 400);
    serve(*p, b, 0);  // b: 400 at 0 s
    at(120s);
    queue(*p, a, 150);
    serve(*p, a, 0);  // a: 150 at 120 s
    queue(*p, a);
    queue(*p, b);
    // Half-life 60 s: b = 400 / 2^2 = 100 < a = 150: b. No decay
    // (0): b = 400 > a = 150: a.
    EXPECT_DOUBLE_EQ(p->attained_service("b"), half_life > 0 ? 100 : 400);
    EXPECT_EQ(p->pick(), half_life > 0 ? &b : &a);
  }
}

TEST_F(ProgramAware, TheHeadsWaitBreaksEqualService) {
  auto p = policy();
  FakeFlow& x = flow("x");
  FakeFlow& y = flow("y");
  at(10s);
  queue(*p, y);
  at(0s);
  queue(*p, x);
  at(20s);
  // Service equal (0): 0.8 x 0.5 each. Waits 20 s and 10 s: x 1, y 0.
  // x 0.6, y 0.4: x, though y was backlogged first.
  EXPECT_EQ(p->pick(), &x);
}

TEST_F(ProgramAware, TheWeightsTradeServiceAgainstWait) {
  for (bool service_first : {true, false}) {
    SCOPED_TRACE(service_first);
    flows_.clear();
    ProgramAwareParams params;
    params.half_life_seconds = 0;
    params.weight_service = service_first ? 0.8 : 0.1;
    params.weight_head_wait = service_first ? 0.2 : 0.9;
    auto p = policy(params);
    FakeFlow& x = flow("x");
    FakeFlow& y = flow("y");
    at(0s);
    queue(*p, x, 100);
    serve(*p, x, 0);  // x: 100
    queue(*p, x);     // x's head enqueued at 0 s
    at(10s);
    queue(*p, y);  // y: 0, head at 10 s
    at(20s);
    // 0.8/0.2: x 0.8 x 0 + 0.2 x 1 = 0.2, y 0.8 x 1 + 0 = 0.8: y.
    // 0.1/0.9: x 0 + 0.9 = 0.9, y 0.1 + 0 = 0.1: x.
    EXPECT_EQ(p->pick(), service_first ? &y : &x);
  }
}

TEST_F(ProgramAware, ThreeProgramsScoredAndATieGoesToTheOlderHead) {
  // Services a 200, b 100, c 0; heads a at 0 s, b at 5 s, c at 10 s;
  // picked at 20 s.
  for (double ws : {0.6, 0.5}) {
    SCOPED_TRACE(ws);
    flows_.clear();
    ProgramAwareParams params;
    params.half_life_seconds = 0;
    params.weight_service = ws;
    params.weight_head_wait = 1 - ws;
    auto p = policy(params);
    FakeFlow& a = flow("a");
    FakeFlow& b = flow("b");
    FakeFlow& c = flow("c");
    at(0s);
    queue(*p, a, 200);
    serve(*p, a, 0);
    queue(*p, b, 100);
    serve(*p, b, 0);
    queue(*p, a);
    at(5s);
    queue(*p, b);
    at(10s);
    queue(*p, c);
    at(20s);
    // norm service a 1, b 0.5, c 0; norm wait a 1 (20 s), b 0.5, c 0.
    // 0.6/0.4: a 0 + 0.4 = 0.4, b 0.3 + 0.2 = 0.5, c 0.6 + 0 = 0.6: c.
    // 0.5/0.5: a 0.5, b 0.5, c 0.5, a tie: the oldest head, a.
    EXPECT_EQ(p->pick(), ws == 0.6 ? &c : &a);
  }
}

TEST_F(ProgramAware, AProgramIdlePastTheTtlIsSweptAndOneInFlightIsNot) {
  ProgramAwareParams params;
  params.eviction_ttl_seconds = 100;
  params.eviction_sweep_seconds = 10;
  auto p = policy(params);
  FakeFlow& a = flow("a");
  FakeFlow& b = flow("b");
  FakeFlow& c = flow("c");
  at(0s);
  queue(*p, a, 300);
  serve(*p, a, 0);  // a completes at 0 s
  p->on_removed(a);
  queue(*p, c, 10);
  c.queue.pop_front();
  p->on_idle(c);
  p->on_dispatched(c, QueuedRequest{});  // c: in flight, never completes
  queue(*p, b);
  at(5s);
  EXPECT_EQ(p->pick(), &b);  // first pick: next sweep at 15 s
  at(50s);
  EXPECT_EQ(p->pick(), &b);  // swept: a idle 50 s <= 100 s stays
  EXPECT_EQ(p->program_count(), 3u);
  EXPECT_DOUBLE_EQ(p->attained_service("a"), 300 * std::exp2(-50.0 / 60));
  at(120s);
  EXPECT_EQ(p->pick(), &b);  // a idle 120 s > 100 s: evicted; c in flight, b queued
  EXPECT_EQ(p->program_count(), 2u);
  EXPECT_EQ(p->attained_service("a"), 0);
  at(1000s);
  EXPECT_EQ(p->pick(), &b);
  EXPECT_EQ(p->program_count(), 2u);
}

TEST_F(ProgramAware, TheTableIsBoundedByMaxPrograms) {
  ProgramAwareParams params;
  params.max_programs = 2;
  params.eviction_ttl_seconds = 0;  // no sweep: only the bound evicts
  auto p = policy(params);
  FakeFlow& a = flow("a");
  FakeFlow& b = flow("b");
  FakeFlow& c = flow("c");
  FakeFlow& d = flow("d");
  at(1s);
  queue(*p, a, 10);
  serve(*p, a, 0);  // a: last completion 1 s
  at(2s);
  queue(*p, b, 20);
  serve(*p, b, 0);  // b: 2 s
  at(3s);
  queue(*p, c, 30);  // full: a, idle longest, makes room
  EXPECT_EQ(p->program_count(), 2u);
  EXPECT_EQ(p->attained_service("a"), 0);
  EXPECT_DOUBLE_EQ(p->attained_service("b"), 20 / std::exp2(1.0 / 60));
  queue(*p, b);  // b and c backlogged: nothing can make room
  queue(*p, d, 40);
  EXPECT_EQ(p->program_count(), 2u);
  serve(*p, d, 5);  // d is not tracked: its service is not kept
  EXPECT_EQ(p->attained_service("d"), 0);
  EXPECT_EQ(p->program_count(), 2u);
}

TEST_F(ProgramAware, MetricsAreMeanWaitsAndJainsIndex) {
  auto p = policy();
  FakeFlow& a = flow("a");
  FakeFlow& b = flow("b");
  at(0s);
  queue(*p, a);
  queue(*p, b);
  at(10ms);
  serve(*p, a, 0);  // a waited 10 ms
  at(30ms);
  serve(*p, b, 0);  // b waited 30 ms
  // Jain: (10 + 30)^2 / (2 x (100 + 900)) = 1600 / 2000 = 0.8.
  EXPECT_DOUBLE_EQ(p->jains_fairness_index(), 0.8);
  for (const auto& s : p->stats())
    EXPECT_DOUBLE_EQ(s.avg_wait_ms, s.id == "a" ? 10.0 : 30.0) << s.id;
  // One program with waits: 1.
  auto q = policy();
  EXPECT_EQ(q->jains_fairness_index(), 1.0);
}

// In the controller: a band whose fairnessPolicyRef is program-aware-fairness
// charges dispatches and output tokens through the policy and tells it of
// completions; the program with less service goes first.
TEST(ProgramAwareController, TheBandServesTheProgramWithLessServiceFirst) {
  ControllerConfig cfg;
  cfg.registry.default_band.fairness = "program-aware-fairness";
  std::vector<Decision> out;
  Controller c(cfg, std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 1, 1000000, 0}),
               [&](const Decision& d) { out.push_back(d); });
  c.set_endpoints({EndpointIdentity{"127.0.0.1:1"}});
  auto request = [](std::uint64_t cookie, const char* flow, std::uint64_t tokens) {
    EnqueueRequest r;
    r.cookie = cookie;
    r.flow_id = flow;
    r.input_tokens = tokens;
    return r;
  };
  const TimePoint t0{};
  c.enqueue(request(1, "heavy", 1000), t0);
  c.dispatch(t0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].outcome, QueueOutcome::kDispatched);
  // heavy holds the one slot; both programs queue, heavy's head first.
  c.enqueue(request(2, "heavy", 10), t0 + 1ms);
  c.enqueue(request(3, "light", 10), t0 + 2ms);
  c.complete(out[0].ticket, 100, t0 + 3ms);  // heavy: 1000 + 2 x 100 = 1200
  auto* policy =
      dynamic_cast<ProgramAwareFairness*>(&c.registry().bands().begin()->second->fairness());
  ASSERT_NE(policy, nullptr);
  // Decay over a few milliseconds of a 60 s half-life: within 0.1.
  EXPECT_NEAR(policy->attained_service("heavy"), 1200, 0.1);
  for (const auto& s : policy->stats()) EXPECT_EQ(s.in_flight, 0u) << s.id;
  // light: 0.8 x 1 + 0.2 x 0 = 0.8; heavy: 0 + 0.2 x 1 = 0.2.
  c.dispatch(t0 + 3ms);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].cookie, 3u);
}

// ---------------------------------------------------------------- config

std::string config_with(const std::string& parameters) {
  return "featureGates: [flowControl]\nplugins:\n- type: program-aware-fairness\n"
         "  parameters:\n" +
         parameters +
         "flowControl:\n  defaultPriorityBand:\n"
         "    fairnessPolicyRef: program-aware-fairness\n";
}

void expect_config_error(const std::string& parameters, const std::string& field,
                         const std::string& line, const std::string& message) {
  try {
    config::load_config_string(config_with(parameters), "test.yaml");
    FAIL() << "accepted " << parameters;
  } catch (const config::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.yaml:" + line + ": plugins[program-aware-fairness].parameters." +
                        field + ": " + message),
              std::string::npos)
        << what;
  }
}

TEST(ProgramAwareConfig, ParametersReachTheBandsPolicy) {
  auto c = config::load_config_string(
      config_with("    strategy: las\n    lasWeightService: 0.7\n    lasWeightHeadWait: 0.3\n"
                  "    lasHalfLifeSeconds: 30\n    evictionTtlSeconds: 600\n"
                  "    evictionSweepSeconds: 60\n    maxPrograms: 500\n"),
      "test.yaml");
  EXPECT_EQ(c.flow_control.default_band.fairness_type, "program-aware-fairness");
  const auto params = controller_config(c).fairness.program_aware;
  EXPECT_EQ(params, (ProgramAwareParams{0.7, 0.3, 30, 600, 60, 500}));
}

// llm-d's example, deploy/config/sim-program-aware-config.yaml.
TEST(ProgramAwareConfig, LlmDsExampleConfigLoads) {
  auto c = config::load_config_string(R"(apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: program-aware-fairness
- type: queue-scorer
- type: max-score-picker
- type: single-profile-handler
featureGates:
- flowControl
flowControl:
  defaultPriorityBand:
    fairnessPolicyRef: program-aware-fairness
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
)",
                                      "test.yaml");
  EXPECT_EQ(c.flow_control.default_band.fairness_type, "program-aware-fairness");
  EXPECT_EQ(controller_config(c).fairness.program_aware, ProgramAwareParams{});
}

TEST(ProgramAwareConfig, DefaultsAreLlmDs) {
  auto c = config::load_config_string(config_with("    strategy: las\n"), "test.yaml");
  EXPECT_EQ(controller_config(c).fairness.program_aware,
            (ProgramAwareParams{0.8, 0.2, 60, 3600, 300, 10000}));
}

// llm-d's agentic-serving guide (guides/agentic-serving/router/
// fairness-las-plugins.yaml) still sets lasDecayFactor, which llm-d-router
// dropped for lasHalfLifeSeconds: it loads, and the half-life decides.
TEST(ProgramAwareConfig, TheGuidesLasDecayFactorLoadsAndIsIgnored) {
  auto c = config::load_config_string(
      config_with("    strategy: \"las\"\n    lasWeightService: 0.8\n    lasWeightHeadWait: 0.2\n"
                  "    lasDecayFactor: 0.99997\n"),
      "test.yaml");
  EXPECT_EQ(controller_config(c).fairness.program_aware, ProgramAwareParams{});
}

TEST(ProgramAwareConfig, ALasDecayFactorAboveOneIsAnError) {
  expect_config_error("    lasDecayFactor: 1.5\n", "lasDecayFactor", "5", "must be in (0, 1]");
}

TEST(ProgramAwareConfig, AnUnknownStrategyIsAnError) {
  expect_config_error("    strategy: vtc\n", "strategy", "5", "unknown strategy 'vtc'");
}

TEST(ProgramAwareConfig, ANegativeServiceWeightIsAnError) {
  expect_config_error("    lasWeightService: -0.1\n", "lasWeightService", "5",
                      "must not be negative");
}

TEST(ProgramAwareConfig, ANegativeHeadWaitWeightIsAnError) {
  expect_config_error("    lasWeightHeadWait: -1\n", "lasWeightHeadWait", "5",
                      "must not be negative");
}

TEST(ProgramAwareConfig, ANegativeHalfLifeIsAnError) {
  expect_config_error("    lasHalfLifeSeconds: -60\n", "lasHalfLifeSeconds", "5",
                      "must not be negative");
}

TEST(ProgramAwareConfig, ANegativeEvictionTtlIsAnError) {
  expect_config_error("    evictionTtlSeconds: -1\n", "evictionTtlSeconds", "5",
                      "must not be negative");
}

TEST(ProgramAwareConfig, AZeroSweepIntervalIsAnError) {
  expect_config_error("    strategy: las\n    evictionSweepSeconds: 0\n", "evictionSweepSeconds",
                      "6", "must be greater than zero");
}

TEST(ProgramAwareConfig, AZeroMaxProgramsIsAnError) {
  expect_config_error("    maxPrograms: 0\n", "maxPrograms", "5", "must be 1 to 1000000");
}

}  // namespace
}  // namespace sluice::flowcontrol
