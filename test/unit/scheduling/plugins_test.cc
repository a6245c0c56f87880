// Each in-tree scheduling plugin alone, with its edge cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <set>

#include "flowcontrol/saturation_detectors.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/plugins/by_label_filter.h"
#include "scheduling/plugins/by_label_selector_filter.h"
#include "scheduling/plugins/in_flight_requests_scorer.h"
#include "scheduling/plugins/kv_cache_utilization_scorer.h"
#include "scheduling/plugins/lora_affinity_scorer.h"
#include "scheduling/plugins/max_score_picker.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/plugins/queue_scorer.h"
#include "scheduling/plugins/random_picker.h"
#include "scheduling/plugins/running_requests_size_scorer.h"
#include "scheduling/plugins/saturation_filter.h"
#include "scheduling/plugins/session_affinity_scorer.h"
#include "scheduling/plugins/weighted_random_picker.h"
#include "scheduling/prefix_hasher.h"
#include "scheduling_test_util.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::vector<double> run(Scorer& s, const Pool& pool, const Request& r = {}) {
  CycleState cycle;
  auto c = pool.all();
  std::vector<double> out(c.size(), -1);
  s.score(cycle, r, c, out);
  return out;
}

TEST(QueueScorer, MinMaxNormalizedAndEqualQueuesScoreOne) {
  Pool p;
  p.add("a").metrics.waiting_queue_size = 0;
  p.add("b").metrics.waiting_queue_size = 5;
  p.add("c").metrics.waiting_queue_size = 10;
  QueueScorer s;
  EXPECT_EQ(run(s, p), (std::vector<double>{1.0, 0.5, 0.0}));
  for (auto& e : p.endpoints) e.metrics.waiting_queue_size = 3;
  EXPECT_EQ(run(s, p), (std::vector<double>{1.0, 1.0, 1.0}));
  Pool one;
  one.add("x").metrics.waiting_queue_size = 42;
  EXPECT_EQ(run(s, one), (std::vector<double>{1.0}));
}

TEST(QueueScorer, CountsDispatchesSinceTheLastScrape) {
  Pool p;
  p.add("a").metrics.waiting_queue_size = 2;
  p.add("b").metrics.waiting_queue_size = 0;
  p.endpoints[1].dispatched_since_scrape = 4;  // sent 4 since its scrape showed 0
  QueueScorer s;
  EXPECT_EQ(run(s, p), (std::vector<double>{1.0, 0.0}));
}

TEST(RunningRequestsSizeScorer, FewestRunningIsBest) {
  Pool p;
  p.add("a").metrics.running_requests_size = 8;
  p.add("b").metrics.running_requests_size = 2;
  RunningRequestsSizeScorer s;
  EXPECT_EQ(run(s, p), (std::vector<double>{0.0, 1.0}));
}

TEST(InFlightRequestsScorer, FewestInFlightIsBest) {
  Pool p;
  p.add("a").in_flight = 3;
  p.add("b").in_flight = 1;
  p.add("c").in_flight = 2;
  InFlightRequestsScorer s;
  EXPECT_EQ(run(s, p), (std::vector<double>{0.0, 1.0, 0.5}));
}

TEST(KvCacheUtilizationScorer, OneMinusUsage) {
  Pool p;
  p.add("a").metrics.kv_cache_usage = 0.25;
  p.add("b").metrics.kv_cache_usage = 1.0;
  p.add("c");  // stale/never scraped: usage 0
  KvCacheUtilizationScorer s;
  EXPECT_EQ(run(s, p), (std::vector<double>{0.75, 0.0, 1.0}));
}

TEST(LoraAffinityScorer, ActiveThenFreeSlotThenWaitingThenNone) {
  Pool p;
  auto& active = p.add("active").metrics;
  active.active_models = {"sql-lora"};
  active.max_active_models = 1;
  auto& free_slot = p.add("free").metrics;
  free_slot.active_models = {"other"};
  free_slot.waiting_models = {"sql-lora"};  // waiting, but a slot is free: 0.8 wins
  free_slot.max_active_models = 4;
  auto& waiting = p.add("waiting").metrics;
  waiting.active_models = {"other"};
  waiting.waiting_models = {"sql-lora"};
  waiting.max_active_models = 2;
  auto& full = p.add("full").metrics;
  full.active_models = {"x", "y"};
  full.max_active_models = 2;
  p.add("no-lora-info");
  Request r;
  r.model = "sql-lora";
  LoraAffinityScorer s;
  EXPECT_EQ(run(s, p, r), (std::vector<double>{1.0, 0.8, 0.6, 0.0, 0.0}));
}

TEST(PrefixHasher, ChainsFullBlocksSeededWithTheModel) {
  RequestPreparation prep;  // 16 tokens x 4 chars = 64-char blocks
  Request a, b, c;
  const std::string prompt(64 * 3 + 10, 'x');
  compute_prefix_hashes(prompt, "m1", prep, a);
  compute_prefix_hashes(prompt, "m2", prep, b);
  EXPECT_EQ(a.prefix_hashes.size(), 3u);  // the partial block is not hashed
  EXPECT_EQ(a.prompt_blocks, 3u);
  EXPECT_NE(a.prefix_hashes[0], b.prefix_hashes[0]);  // another model, another cache
  // Same first block, different second: first hash equal, the chain differs after.
  std::string other = prompt;
  other[64 + 5] = 'y';
  compute_prefix_hashes(other, "m1", prep, c);
  EXPECT_EQ(a.prefix_hashes[0], c.prefix_hashes[0]);
  EXPECT_NE(a.prefix_hashes[1], c.prefix_hashes[1]);
  EXPECT_NE(a.prefix_hashes[2], c.prefix_hashes[2]);
  // Capped at maxPrefixBlocksToMatch.
  prep.max_prefix_blocks = 2;
  Request d;
  compute_prefix_hashes(prompt, "m1", prep, d);
  EXPECT_EQ(d.prefix_hashes.size(), 2u);
  EXPECT_EQ(d.prompt_blocks, 3u);
  // Shorter than a block: nothing to match.
  Request e;
  compute_prefix_hashes("short", "m1", RequestPreparation{}, e);
  EXPECT_TRUE(e.prefix_hashes.empty());
}

TEST(PrefixIndex, LongestLeadingRunPerEndpoint) {
  PrefixIndex idx(100);
  idx.insert(0, std::vector<std::uint64_t>{1, 2, 3, 4});
  idx.insert(1, std::vector<std::uint64_t>{1, 2});
  idx.insert(2, std::vector<std::uint64_t>{2, 3, 4});  // not a leading run
  PrefixMatch m;
  idx.match(std::vector<std::uint64_t>{1, 2, 3, 9}, m);
  EXPECT_EQ(m.total_blocks, 4u);
  EXPECT_EQ(m.blocks_on(0), 3u);
  EXPECT_EQ(m.blocks_on(1), 2u);
  EXPECT_EQ(m.blocks_on(2), 0u);
}

TEST(PrefixIndex, EvictsLeastRecentlyUsedBlocksPerEndpoint) {
  PrefixIndex idx(3);
  idx.insert(0, std::vector<std::uint64_t>{1, 2, 3});
  idx.insert(
      0, std::vector<std::uint64_t>{7});  // evicts the LRU block: 3 (the tail of the first prompt)
  EXPECT_EQ(idx.blocks_on(0), 3u);
  PrefixMatch m;
  idx.match(std::vector<std::uint64_t>{1, 2, 3}, m);
  EXPECT_EQ(m.blocks_on(0), 2u);
  idx.insert(1, std::vector<std::uint64_t>{1});
  idx.forget(0);
  idx.match(std::vector<std::uint64_t>{1, 2}, m);
  EXPECT_EQ(m.blocks_on(0), 0u);
  EXPECT_EQ(m.blocks_on(1), 1u);
  EXPECT_EQ(idx.distinct_blocks(), 1u);
}

// The index (its flat block table with backward-shift deletion, inline and
// overflow holders, the bisecting match) against a naive model: per
// endpoint an LRU list of at most `capacity` blocks; a match is the leading
// run present in each list, found block by block. Block hashes are chains,
// as prefix_hasher.h makes them: a prompt of tokens from a three-letter
// alphabet, each block's hash covering the blocks before it, so prompts
// share prefixes of every length, blocks are held by many endpoints (past
// the three inline holders) and evictions are frequent.
TEST(PrefixIndex, MatchesANaiveModelUnderRandomInsertsEvictionsAndForgets) {
  constexpr std::uint32_t kCapacity = 6, kSlots = 7;
  PrefixIndex idx(kCapacity);
  std::vector<std::list<std::uint64_t>> model(kSlots);
  std::mt19937 rng(5);
  const auto chain = [&](std::size_t n) {
    std::vector<std::uint64_t> out(n);
    std::uint64_t h = 0x9E3779B97F4A7C15ull;
    for (auto& b : out) {
      h = (h ^ (1 + rng() % 3)) * 0xff51afd7ed558ccdull;
      h ^= h >> 29;
      b = h;
    }
    return out;
  };
  for (int step = 0; step < 20000; ++step) {
    const std::uint32_t slot = rng() % kSlots;
    std::vector<std::uint64_t> blocks = chain(1 + rng() % 8);
    if (rng() % 50 == 0) {
      idx.forget(slot);
      model[slot].clear();
    } else {
      idx.insert(slot, blocks);
      auto& l = model[slot];
      for (std::size_t k = blocks.size(); k-- > 0;) {
        auto it = std::find(l.begin(), l.end(), blocks[k]);
        if (it != l.end()) {
          l.splice(l.begin(), l, it);
          continue;
        }
        if (l.size() >= kCapacity) l.pop_back();
        l.push_front(blocks[k]);
      }
    }
    const std::vector<std::uint64_t> probe = chain(1 + rng() % 10);
    PrefixMatch m;
    idx.match(probe, m);
    std::set<std::uint64_t> all;
    for (std::uint32_t s = 0; s < kSlots; ++s) {
      const auto& l = model[s];
      all.insert(l.begin(), l.end());
      std::uint32_t run = 0;
      while (run < probe.size() && std::find(l.begin(), l.end(), probe[run]) != l.end()) ++run;
      ASSERT_EQ(m.blocks_on(s), run) << "step " << step << " slot " << s;
      ASSERT_EQ(idx.blocks_on(s), l.size()) << "step " << step;
    }
    ASSERT_EQ(idx.distinct_blocks(), all.size()) << "step " << step;
  }
}

TEST(PrefixCacheScorer, ScoresTheCachedShareAndRecordsAfterDispatch) {
  Pool p;
  p.add("a");
  p.add("b");
  ApproxPrefixCacheProducer prod(PrefixParams{});
  PrefixCacheScorer s(&prod);
  Request r;
  compute_prefix_hashes(std::string(64 * 4, 'q'), "m", RequestPreparation{}, r);
  EXPECT_EQ(run(s, p, r), (std::vector<double>{0.0, 0.0}));  // nothing cached yet
  CycleState cycle;
  SchedulingResult res;
  res.serving.push_back(&p.endpoints[1]);
  prod.pre_request(cycle, r, res);
  EXPECT_EQ(run(s, p, r), (std::vector<double>{0.0, 1.0}));
  Request half;
  compute_prefix_hashes(std::string(64 * 2, 'q') + std::string(64 * 2, 'z'), "m",
                        RequestPreparation{}, half);
  EXPECT_EQ(run(s, p, half), (std::vector<double>{0.0, 0.5}));
  Request none;  // no full block
  EXPECT_EQ(run(s, p, none), (std::vector<double>{0.0, 0.0}));
}

TEST(SessionAffinityScorer, TokenNamesTheEndpoint) {
  EXPECT_EQ(base64_decode(base64_encode("10.0.0.1:8000")), "10.0.0.1:8000");
  EXPECT_EQ(base64_encode("ab"), "YWI=");
  EXPECT_EQ(base64_decode("not base64!"), "");
  Pool p;
  p.add("10.0.0.1:8000");
  p.add("10.0.0.2:8000");
  SessionAffinityScorer s;
  Request r;
  EXPECT_EQ(run(s, p, r), (std::vector<double>{0.0, 0.0}));
  r.session_token = base64_encode("10.0.0.2:8000");
  EXPECT_EQ(run(s, p, r), (std::vector<double>{0.0, 1.0}));
  r.session_token = "garbage%%";
  EXPECT_EQ(run(s, p, r), (std::vector<double>{0.0, 0.0}));
  CycleState cycle;
  SchedulingResult res;
  res.targets.push_back(&p.endpoints[0]);
  s.pre_request(cycle, r, res);
  ASSERT_EQ(res.response_headers.size(), 1u);
  EXPECT_EQ(res.response_headers[0].first, "x-session-token");
  EXPECT_EQ(base64_decode(res.response_headers[0].second), "10.0.0.1:8000");
}

std::vector<ScoredEndpoint> scored(const Pool& p, std::vector<double> s) {
  std::vector<ScoredEndpoint> out;
  for (std::size_t i = 0; i < s.size(); ++i) out.push_back({&p.endpoints[i], s[i]});
  return out;
}

TEST(MaxScorePicker, BestFirstAndRandomTieBreak) {
  Pool p;
  for (int i = 0; i < 3; ++i) p.add("e" + std::to_string(i));
  CycleState cycle;
  MaxScorePicker one(1, 7);
  std::vector<const Endpoint*> t;
  auto s = scored(p, {0.2, 0.9, 0.5});
  one.pick(cycle, {}, s, t);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], &p.endpoints[1]);
  // Ties: every tied endpoint gets picked, about equally (1000 draws, 3-way
  // tie: each expected 333; binomial sd ~15, tolerance 6 sd).
  std::map<const Endpoint*, int> counts;
  for (int i = 0; i < 1000; ++i) {
    t.clear();
    auto tie = scored(p, {0.5, 0.5, 0.5});
    one.pick(cycle, {}, tie, t);
    counts[t[0]]++;
  }
  for (const auto& e : p.endpoints) EXPECT_NEAR(counts[&e], 333, 90) << e.address;
  MaxScorePicker two(2, 7);
  t.clear();
  s = scored(p, {0.2, 0.9, 0.5});
  two.pick(cycle, {}, s, t);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], &p.endpoints[1]);
  EXPECT_EQ(t[1], &p.endpoints[2]);
}

TEST(RandomPicker, DistinctUniformTargets) {
  Pool p;
  for (int i = 0; i < 4; ++i) p.add("e" + std::to_string(i));
  RandomPicker r(3, 11);
  CycleState cycle;
  std::map<const Endpoint*, int> counts;
  for (int i = 0; i < 400; ++i) {
    std::vector<const Endpoint*> t;
    auto s = scored(p, {1, 0, 0, 0});
    r.pick(cycle, {}, s, t);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_NE(t[0], t[1]);
    EXPECT_NE(t[1], t[2]);
    EXPECT_NE(t[0], t[2]);
    counts[t[0]]++;
  }
  for (const auto& e : p.endpoints) EXPECT_NEAR(counts[&e], 100, 45);  // scores ignored
}

TEST(WeightedRandomPicker, ProportionalToScoreAndNeverZeroWhenOthersPositive) {
  Pool p;
  for (int i = 0; i < 3; ++i) p.add("e" + std::to_string(i));
  WeightedRandomPicker w(1, 5);
  CycleState cycle;
  std::map<const Endpoint*, int> counts;
  const int n = 3000;
  for (int i = 0; i < n; ++i) {
    std::vector<const Endpoint*> t;
    auto s = scored(p, {0.75, 0.25, 0.0});
    w.pick(cycle, {}, s, t);
    ASSERT_EQ(t.size(), 1u);
    counts[t[0]]++;
  }
  // Expected 2250 / 750 / 0; binomial sd ~24, tolerance 5 sd.
  EXPECT_NEAR(counts[&p.endpoints[0]], 2250, 120);
  EXPECT_NEAR(counts[&p.endpoints[1]], 750, 120);
  EXPECT_EQ(counts[&p.endpoints[2]], 0);
  // All zero: uniform.
  counts.clear();
  for (int i = 0; i < 900; ++i) {
    std::vector<const Endpoint*> t;
    auto s = scored(p, {0, 0, 0});
    w.pick(cycle, {}, s, t);
    counts[t.at(0)]++;
  }
  for (const auto& e : p.endpoints) EXPECT_NEAR(counts[&e], 300, 80);
}

std::vector<std::string> addresses(const std::vector<const Endpoint*>& v) {
  std::vector<std::string> out;
  for (auto* e : v) out.push_back(e->address);
  return out;
}

TEST(ByLabelFilters, RoleFiltersFollowLlmd) {
  Pool p;
  p.add("prefill", {{"llm-d.ai/role", "prefill"}});
  p.add("decode", {{"llm-d.ai/role", "decode"}});
  p.add("both", {{"llm-d.ai/role", "both"}});
  p.add("unlabelled");
  p.add("encode", {{"llm-d.ai/role", "encode"}});
  CycleState cycle;
  auto c = p.all();
  ByLabelFilter::prefill()->filter(cycle, {}, c);
  EXPECT_EQ(addresses(c), (std::vector<std::string>{"prefill", "both"}));
  c = p.all();
  ByLabelFilter::decode()->filter(cycle, {}, c);
  EXPECT_EQ(addresses(c), (std::vector<std::string>{"decode", "both", "unlabelled"}));
  c = p.all();
  ByLabelFilter gpu("by-label", "gpu", {"h100"}, false);
  gpu.filter(cycle, {}, c);
  EXPECT_TRUE(c.empty());
}

TEST(ByLabelSelectorFilter, MatchLabelsAndExpressions) {
  Pool p;
  p.add("a", {{"zone", "z1"}, {"tier", "gold"}});
  p.add("b", {{"zone", "z2"}, {"tier", "gold"}});
  p.add("c", {{"zone", "z1"}});
  CycleState cycle;
  auto c = p.all();
  ByLabelSelectorFilter f("by-label-selector", {{"tier", LabelRequirement::Op::kExists, {}},
                                                {"zone", LabelRequirement::Op::kNotIn, {"z2"}}});
  f.filter(cycle, {}, c);
  EXPECT_EQ(addresses(c), (std::vector<std::string>{"a"}));
  c = p.all();
  ByLabelSelectorFilter none("label-selector-filter", {});
  none.filter(cycle, {}, c);
  EXPECT_EQ(c.size(), 3u);  // an empty selector keeps all
}

TEST(SaturationFilter, UtilizationFailsOpenConcurrencyDoesNot) {
  Pool p;
  p.add("busy").metrics.waiting_queue_size = 10;
  p.add("idle").metrics.waiting_queue_size = 0;
  Pool stale;
  stale.add("never-scraped").metrics.update_time = {};
  CycleState cycle;
  SaturationFilter util(std::make_unique<flowcontrol::UtilizationDetector>(), true);
  auto c = p.all();
  util.filter(cycle, {}, c);
  EXPECT_EQ(addresses(c), (std::vector<std::string>{"idle"}));
  c = stale.all();
  util.filter(cycle, {}, c);
  EXPECT_EQ(c.size(), 1u);  // would drop all: keeps all
  flowcontrol::ConcurrencyParams cp;
  cp.max_concurrency = 2;
  SaturationFilter conc(std::make_unique<flowcontrol::ConcurrencyDetector>(cp), false);
  p.endpoints[0].in_flight = 2;
  p.endpoints[1].in_flight = 2;
  c = p.all();
  conc.filter(cycle, {}, c);
  EXPECT_TRUE(c.empty());
}

}  // namespace
}  // namespace sluice::scheduling
