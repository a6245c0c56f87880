#include "tools/mock/mock_engine.h"

#include <gtest/gtest.h>

namespace sluice::mock {
namespace {

using std::chrono::microseconds;

struct Recorder {
  std::vector<std::string> tokens;
  bool finished = false;
  void attach(Sequence& s) {
    s.on_token = [this](Sequence&, std::string_view t, bool last) {
      tokens.emplace_back(t);
      finished = last;
    };
  }
};

EngineOptions opts(std::size_t max_running = 2) {
  EngineOptions o;
  o.max_running = max_running;
  o.prefill_us_per_token = 100;
  o.decode_ms_per_token = 20;
  o.kv_capacity_tokens = 1000;
  return o;
}

TEST(MockEngine, StepTimeIsPrefillPlusDecode) {
  MockEngine e(opts());
  Recorder r;
  auto s = e.make_sequence("m", std::string(400, 'a'), 100, 3);
  r.attach(*s);
  e.submit(s);
  // 100 uncached tokens * 100 us + 20 ms decode.
  EXPECT_EQ(e.begin_step(), microseconds(30000));
  e.end_step();
  EXPECT_EQ(e.begin_step(), microseconds(20000));
  e.end_step();
  EXPECT_EQ(e.begin_step(), microseconds(20000));
  e.end_step();
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(e.begin_step(), std::nullopt);
}

TEST(MockEngine, BatchIsBoundedRestWaits) {
  MockEngine e(opts(2));
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(e.make_sequence("m", "p" + std::to_string(i), 1, 2));
    e.submit(seqs.back());
  }
  ASSERT_TRUE(e.begin_step());
  EXPECT_EQ(e.running(), 2u);
  EXPECT_EQ(e.waiting(), 1u);
  EXPECT_NEAR(e.kv_usage(), 2.0 / 1000, 1e-9);
  e.end_step();
  e.begin_step();
  e.end_step();  // first two finish
  ASSERT_TRUE(e.begin_step());
  EXPECT_EQ(e.running(), 1u);
  EXPECT_EQ(e.waiting(), 0u);
}

TEST(MockEngine, KvCapacityHoldsBackAdmission) {
  MockEngine e(opts(8));
  auto a = e.make_sequence("m", "a", 600, 1);
  auto b = e.make_sequence("m", "b", 600, 1);
  e.submit(a);
  e.submit(b);
  e.begin_step();
  EXPECT_EQ(e.running(), 1u);  // 600 + 600 > 1000
  EXPECT_EQ(e.waiting(), 1u);
}

TEST(MockEngine, PrefixCacheCutsPrefill) {
  MockEngine e(opts());
  std::string prompt(64 * 4, 'x');  // 4 blocks of 16 tokens
  auto first = e.make_sequence("m", prompt, 64, 1);
  e.submit(first);
  EXPECT_EQ(e.begin_step(), microseconds(20000 + 6400));
  e.end_step();
  auto second = e.make_sequence("m", prompt, 64, 1);
  e.submit(second);
  EXPECT_EQ(e.begin_step(), microseconds(20000));
  EXPECT_EQ(second->cached_tokens, 64u);
  e.end_step();
  // Another model name seeds a different hash chain: no hit.
  auto other = e.make_sequence("other-model", prompt, 64, 1);
  e.submit(other);
  EXPECT_EQ(e.begin_step(), microseconds(26400));
}

TEST(MockEngine, CancelledSequenceLeavesAtNextStep) {
  MockEngine e(opts());
  Recorder r;
  auto s = e.make_sequence("m", "p", 1, 100);
  r.attach(*s);
  e.submit(s);
  e.begin_step();
  e.end_step();
  e.cancel(*s);
  EXPECT_EQ(e.begin_step(), std::nullopt);
  EXPECT_EQ(e.running(), 0u);
  EXPECT_EQ(r.tokens.size(), 1u);
}

TEST(MockEngine, DeterministicUnderSeed) {
  auto run = [](std::uint64_t seed) {
    EngineOptions o = opts();
    o.seed = seed;
    MockEngine e(o);
    Recorder r;
    auto s = e.make_sequence("m", "same prompt", 3, 8);
    r.attach(*s);
    e.submit(s);
    while (e.begin_step()) e.end_step();
    std::string all;
    for (auto& t : r.tokens) all += t;
    return all;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(MockEngine, ZeroMaxTokensFinishesWithoutTokens) {
  MockEngine e(opts());
  Recorder r;
  auto s = e.make_sequence("m", "p", 1, 0);
  r.attach(*s);
  e.submit(s);
  e.begin_step();
  e.end_step();
  EXPECT_TRUE(r.finished);
  ASSERT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.tokens[0], "");
  EXPECT_EQ(e.begin_step(), std::nullopt);
}

}  // namespace
}  // namespace sluice::mock

namespace sluice::mock {
namespace {

EngineOptions one_slot(bool priority) {
  EngineOptions o;
  o.max_running = 1;
  o.decode_ms_per_token = 1;
  o.prefill_us_per_token = 0;
  o.kv_capacity_tokens = 100000;
  o.priority_scheduling = priority;
  return o;
}

// Which sequence runs first of those waiting, and in what order all finish.
std::vector<std::uint64_t> finish_order(MockEngine& e,
                                        const std::vector<std::shared_ptr<Sequence>>& seqs) {
  std::vector<std::uint64_t> done;
  for (auto& s : seqs) {
    s->on_token = [&done](Sequence& q, std::string_view, bool last) {
      if (last) done.push_back(q.id);
    };
    e.submit(s);
  }
  for (int step = 0; step < 1000 && e.begin_step(); ++step) e.end_step();
  return done;
}

// vLLM --scheduling-policy priority: the waiting queue by (priority,
// arrival), lower first; fcfs: arrival order whatever the priority. All
// five wait before the first step; one runs at a time.
TEST(MockEnginePriority, WaitingQueueByPriorityThenArrival) {
  for (bool priority : {false, true}) {
    MockEngine e(one_slot(priority));
    std::vector<std::shared_ptr<Sequence>> seqs;
    for (std::int64_t p : {5, 5, -100, 0, -100}) {
      seqs.push_back(e.make_sequence("m", "prompt " + std::to_string(seqs.size()), 4, 3));
      seqs.back()->priority = p;
    }
    auto order = finish_order(e, seqs);
    std::vector<std::uint64_t> want =
        priority ? std::vector<std::uint64_t>{seqs[2]->id, seqs[4]->id, seqs[3]->id, seqs[0]->id,
                                              seqs[1]->id}
                 : std::vector<std::uint64_t>{seqs[0]->id, seqs[1]->id, seqs[2]->id, seqs[3]->id,
                                              seqs[4]->id};
    EXPECT_EQ(order, want) << (priority ? "priority" : "fcfs");
  }
}

// Under KV pressure vLLM preempts the running sequence with the largest
// (priority, arrival) under priority scheduling, the last scheduled under
// fcfs; the preempted one goes back to waiting and finishes later.
TEST(MockEnginePriority, PreemptionVictimUnderKvPressure) {
  for (bool priority : {false, true}) {
    EngineOptions o = one_slot(priority);
    o.max_running = 2;
    o.kv_capacity_tokens = 30;  // two prompts of 10 fit; their outputs do not
    MockEngine e(o);
    auto low = e.make_sequence("m", "low", 10, 8);
    low->priority = 10;
    auto high = e.make_sequence("m", "high", 10, 8);
    high->priority = -10;
    auto order = finish_order(e, {low, high});
    EXPECT_GE(e.preemptions(), 1u);
    // priority: the low one (larger value) is the victim, so high finishes
    // first; fcfs: the last scheduled (high) is, so low finishes first.
    ASSERT_EQ(order.size(), 2u);
    EXPECT_EQ(order.front(), priority ? high->id : low->id) << (priority ? "priority" : "fcfs");
    EXPECT_EQ(priority ? low->preemptions : high->preemptions, e.preemptions());
  }
}

}  // namespace
}  // namespace sluice::mock
