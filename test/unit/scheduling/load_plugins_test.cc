// llm-d's load and prefix plugins (issue 40): scores and filter outcomes on
// hand-worked examples from llm-d's definitions. Every expected number is
// worked out in the comment beside it, not computed by the code under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "scheduling/plugins/active_request_scorer.h"
#include "scheduling/plugins/inflight_load_producer.h"
#include "scheduling/plugins/load_aware_scorer.h"
#include "scheduling/plugins/no_hit_lru_scorer.h"
#include "scheduling/plugins/prefix_cache_affinity_filter.h"
#include "scheduling/plugins/prefix_cache_scorer.h"
#include "scheduling/plugins/token_load_scorer.h"
#include "scheduling_test_util.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

Pool pool_of(int n) {
  Pool p;
  for (int i = 0; i < n; ++i) p.add("10.0.0." + std::to_string(i) + ":8000");
  return p;
}

// Scores as worked out by hand, to the last bits of a double's rounding.
void expect_scores(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "at " << i;
}

std::vector<double> run(Scorer& s, CycleState& cycle, const Request& r,
                        const std::vector<const Endpoint*>& eps) {
  std::vector<double> out(eps.size(), -1);
  s.score(cycle, r, eps, out);
  return out;
}

std::vector<double> run(Scorer& s, const Pool& p, const Request& r) {
  CycleState cycle;
  return run(s, cycle, r, p.all());
}

// A request of `input` tokens whose prompt hashes to blocks 1..n (16 tokens each).
Request request(std::uint64_t input, std::uint64_t n_blocks = 0) {
  Request r;
  r.input_tokens = input;
  r.block_size_tokens = 16;
  for (std::uint64_t i = 1; i <= n_blocks; ++i) r.prefix_hashes.push_back(i);
  r.prompt_blocks = n_blocks;
  return r;
}

// Records the first `n` blocks of 1..n as cached on `slot`.
void cache(ApproxPrefixCacheProducer& prod, std::uint32_t slot, std::uint64_t n) {
  std::vector<std::uint64_t> hashes;
  for (std::uint64_t i = 1; i <= n; ++i) hashes.push_back(i);
  prod.index().insert(slot, hashes);
}

// Dispatches `r` to `e` through the producer's lifecycle hook; the cycle is
// kept so the request can complete later.
void dispatch(InFlightLoadProducer& load, CycleState& cycle, const Request& r, const Endpoint& e) {
  SchedulingResult res;
  res.serving.push_back(&e);
  load.pre_request(cycle, r, res);
}

TEST(PrefixCacheScorer, MatchLengthWeightBlendsLengthAndRatio) {
  // llm-d: w * min(1, matched * blockSize / scale)^2 + (1 - w) * matched / total.
  Pool p = pool_of(4);
  ApproxPrefixCacheProducer prod(PrefixParams{});
  cache(prod, 0, 2);
  cache(prod, 1, 8);
  cache(prod, 3, 4);
  PrefixCacheScorer s(&prod, 0.5, 64);
  const Request r = request(128, 8);
  // a: 2 of 8 blocks: ratio 0.25, length min(1, 32/64) = 0.5 -> 0.25; 0.5*0.25 + 0.5*0.25 = 0.25
  // b: 8 of 8: ratio 1, length min(1, 128/64) = 1 -> 1; 0.5 + 0.5 = 1
  // c: nothing: 0
  // d: 4 of 8: ratio 0.5, length 64/64 = 1 -> 1; 0.5*1 + 0.5*0.5 = 0.75
  expect_scores(run(s, p, r), {0.25, 1.0, 0.0, 0.75});
  PrefixCacheScorer ratio_only(&prod);  // weight 0 (llm-d's default): the ratio
  expect_scores(run(ratio_only, p, r), {0.25, 1.0, 0.0, 0.5});
  PrefixCacheScorer length_only(&prod, 1.0, 256);
  // weight 1, scale 256: (32/256)^2 = 0.015625, (128/256)^2 = 0.25, 0, (64/256)^2 = 0.0625
  expect_scores(run(length_only, p, r), {0.015625, 0.25, 0.0, 0.0625});
}

TEST(InFlightLoadProducer, RequestTokensAreTheUncachedPromptPlusEstimatedOutput) {
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  InFlightLoadProducer load(InFlightLoadParams{}, &prefix);
  const Request r = request(100, 4);  // 4 hashed blocks = 64 tokens, 36 past them
  // llm-d's uncachedInputTokens: (64 - 16 x matched) + (100 - 64).
  EXPECT_EQ(load.request_tokens(r, 0, 4), 100u);
  EXPECT_EQ(load.request_tokens(r, 3, 4), 52u);  // 16 + 36
  EXPECT_EQ(load.request_tokens(r, 4, 4), 36u);
  // An input estimate shorter than the hashed blocks: the unmatched blocks only.
  EXPECT_EQ(load.request_tokens(request(40, 4), 1, 4), 48u);  // 64 - 16, no tail
  InFlightLoadProducer no_prefix(InFlightLoadParams{}, nullptr);
  EXPECT_EQ(no_prefix.request_tokens(r, 4, 4), 100u);  // no prefix producer: all of it
  // addEstimatedOutputTokens: round(100 x 1.5) = 150 more; capped at 120.
  InFlightLoadParams out;
  out.add_estimated_output_tokens = true;
  EXPECT_EQ(InFlightLoadProducer(out, nullptr).request_tokens(r, 0, 0), 250u);
  out.max_estimated_output_tokens = 120;
  EXPECT_EQ(InFlightLoadProducer(out, nullptr).request_tokens(r, 0, 0), 220u);
  out.max_estimated_output_tokens.reset();
  out.output_ratio = 0.25;  // round(25) = 25
  EXPECT_EQ(InFlightLoadProducer(out, nullptr).request_tokens(r, 0, 0), 125u);
}

TEST(InFlightLoadProducer, ChargesAtDispatchAndReleasesAtTheEnd) {
  Pool p = pool_of(2);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 1, 3);
  InFlightLoadProducer load(InFlightLoadParams{}, &prefix);
  prefix.keep_match_for_lifecycle();
  CycleState c1, c2;
  const Request r = request(100, 4);
  dispatch(load, c1, r, p.endpoints[0]);  // nothing cached there: 100
  dispatch(load, c2, r, p.endpoints[1]);  // 3 of 4 blocks cached: 52
  EXPECT_EQ(load.tokens_in_flight(0), 100u);
  EXPECT_EQ(load.tokens_in_flight(1), 52u);
  load.response_complete(c1, r, 0, 10);
  EXPECT_EQ(load.tokens_in_flight(0), 0u);
  load.response_complete(c1, r, 0, 10);  // a second end releases nothing more
  EXPECT_EQ(load.tokens_in_flight(0), 0u);
  EXPECT_EQ(load.tokens_in_flight(1), 52u);
  // P/D: both serving endpoints charged, both released.
  CycleState c3;
  SchedulingResult pd;
  pd.serving = {&p.endpoints[0], &p.endpoints[1]};
  load.pre_request(c3, request(20), pd);
  EXPECT_EQ(load.tokens_in_flight(0), 20u);
  EXPECT_EQ(load.tokens_in_flight(1), 72u);
  load.response_complete(c3, request(20), 1, 0);
  EXPECT_EQ(load.tokens_in_flight(0), 0u);
  EXPECT_EQ(load.tokens_in_flight(1), 52u);
}

// llm-d's release points (producer.go, ResponseBody): at the first response
// bytes the prefill endpoint's tokens and request go, and without
// addEstimatedOutputTokens the decode endpoint's tokens (its request stays
// until the end). A P/D request of 100 tokens, 4 blocks of 16: decode on a
// (nothing cached: 100), prefill on b (3 of 4 blocks cached: 64 - 48 = 16
// hashed uncached + 36 past the hashed part = 52); a plain 30-token request
// already on a.
TEST(InFlightLoadProducer, ReleasesPromptTokensAtTheFirstResponseBytesAsLlmd) {
  Pool p = pool_of(2);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 1, 3);
  InFlightLoadProducer load(InFlightLoadParams{}, &prefix);
  CycleState plain, c;
  dispatch(load, plain, request(30), p.endpoints[0]);
  SchedulingResult pd;
  pd.serving = {&p.endpoints[0], &p.endpoints[1]};
  const Request r = request(100, 4);
  load.pre_request(c, r, pd);
  EXPECT_EQ(load.tokens_in_flight(0), 130u);  // 30 + 100
  EXPECT_EQ(load.requests_in_flight(0), 2u);
  EXPECT_EQ(load.tokens_in_flight(1), 52u);
  EXPECT_EQ(load.requests_in_flight(1), 1u);
  load.response_started(c, r);
  EXPECT_EQ(load.tokens_in_flight(0), 30u);   // 130 - 100
  EXPECT_EQ(load.requests_in_flight(0), 2u);  // decode's request stays
  EXPECT_EQ(load.tokens_in_flight(1), 0u);
  EXPECT_EQ(load.requests_in_flight(1), 0u);
  load.response_started(c, r);  // told twice: nothing more
  EXPECT_EQ(load.tokens_in_flight(0), 30u);
  load.response_complete(c, r, 0, 7);
  EXPECT_EQ(load.tokens_in_flight(0), 30u);
  EXPECT_EQ(load.requests_in_flight(0), 1u);  // the plain request's
  EXPECT_EQ(load.requests_in_flight(1), 0u);
}

// With addEstimatedOutputTokens (outputRatio 0.5: 100 -> 50 more on each
// endpoint, llm-d estimates from the whole prompt) only the prefill part
// leaves at the first bytes: a keeps 100 + 50 = 150 to the end; b's
// 52 + 50 = 102 and its request go.
TEST(InFlightLoadProducer, WithAnOutputEstimateOnlyPrefillLeavesAtTheFirstBytes) {
  Pool p = pool_of(2);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 1, 3);
  InFlightLoadParams params;
  params.add_estimated_output_tokens = true;
  params.output_ratio = 0.5;
  InFlightLoadProducer load(params, &prefix);
  CycleState c;
  SchedulingResult pd;
  pd.serving = {&p.endpoints[0], &p.endpoints[1]};
  const Request r = request(100, 4);
  load.pre_request(c, r, pd);
  EXPECT_EQ(load.tokens_in_flight(0), 150u);
  EXPECT_EQ(load.tokens_in_flight(1), 102u);
  load.response_started(c, r);
  EXPECT_EQ(load.tokens_in_flight(0), 150u);
  EXPECT_EQ(load.requests_in_flight(0), 1u);
  EXPECT_EQ(load.tokens_in_flight(1), 0u);
  EXPECT_EQ(load.requests_in_flight(1), 0u);
  load.response_complete(c, r, 0, 0);
  EXPECT_EQ(load.tokens_in_flight(0), 0u);
  EXPECT_EQ(load.requests_in_flight(0), 0u);
}

// releasePromptTokensAt: completion (sluice's option): the first bytes
// change nothing; the end releases a's 100 and b's 52 together.
TEST(InFlightLoadProducer, ReleaseAtCompletionKeepsEverythingToTheEnd) {
  Pool p = pool_of(2);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 1, 3);
  InFlightLoadParams params;
  params.release_at_first_chunk = false;
  InFlightLoadProducer load(params, &prefix);
  CycleState c;
  SchedulingResult pd;
  pd.serving = {&p.endpoints[0], &p.endpoints[1]};
  const Request r = request(100, 4);
  load.pre_request(c, r, pd);
  load.response_started(c, r);
  EXPECT_EQ(load.tokens_in_flight(0), 100u);
  EXPECT_EQ(load.tokens_in_flight(1), 52u);
  EXPECT_EQ(load.requests_in_flight(1), 1u);
  load.response_complete(c, r, 0, 0);
  EXPECT_EQ(load.tokens_in_flight(0), 0u);
  EXPECT_EQ(load.tokens_in_flight(1), 0u);
  EXPECT_EQ(load.requests_in_flight(1), 0u);
}

TEST(TokenLoadScorer, ScoresTokensInFlightPlusThisRequestsUncachedTokens) {
  Pool p = pool_of(3);
  InFlightLoadProducer load(InFlightLoadParams{}, nullptr);
  TokenLoadScorer s(&load, 1000);
  CycleState busy1, busy2a, busy2b;
  dispatch(load, busy1, request(300), p.endpoints[1]);
  dispatch(load, busy2a, request(500), p.endpoints[2]);
  dispatch(load, busy2b, request(500), p.endpoints[2]);
  // 1 - min(load, 1000) / 1000 with load = in flight + 100:
  // a: 100 -> 0.9; b: 400 -> 0.6; c: 1100, capped at 1000 -> 0
  expect_scores(run(s, p, request(100)), {0.9, 0.6, 0.0});
  load.response_complete(busy2a, request(500), 2, 0);
  // c: 600 -> 0.4
  expect_scores(run(s, p, request(100)), {0.9, 0.6, 0.4});
  // A load of 0 scores 1 (an empty request on an idle endpoint).
  EXPECT_EQ(run(s, p, request(0))[0], 1.0);
}

TEST(TokenLoadScorer, ACacheWarmEndpointCountsOnlyTheUncachedTokens) {
  Pool p = pool_of(2);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 0, 3);
  InFlightLoadProducer load(InFlightLoadParams{}, &prefix);
  TokenLoadScorer s(&load, 1000);
  // a holds 3 of 4 blocks: 52 tokens -> 1 - 0.052 = 0.948; b: 100 -> 0.9
  const auto scores = run(s, p, request(100, 4));
  EXPECT_DOUBLE_EQ(scores[0], 0.948);
  EXPECT_DOUBLE_EQ(scores[1], 0.9);
}

TEST(ActiveRequestScorer, IdleScoresOneTheRestByDistanceFromTheBusiest) {
  Pool p = pool_of(4);
  const std::uint32_t counts[] = {0, 2, 4, 1};
  for (int i = 0; i < 4; ++i) p.endpoints[i].in_flight = counts[i];
  ActiveRequestScorer plain(0, 1.0);
  // max 4: a idle -> 1; b (4-2)/4 = 0.5; c 0; d (4-1)/4 = 0.75
  expect_scores(run(plain, p, Request{}), {1.0, 0.5, 0.0, 0.75});
  ActiveRequestScorer tuned(1, 0.5);
  // idle at <= 1: a, d -> 1; b (4-2)/4 x 0.5 = 0.25; c 0
  expect_scores(run(tuned, p, Request{}), {1.0, 0.25, 0.0, 1.0});
  for (auto& e : p.endpoints) e.in_flight = 0;
  expect_scores(run(plain, p, Request{}), {1.0, 1.0, 1.0, 1.0});
}

TEST(LoadAwareScorer, HalfForAnEmptyQueueLessAsItFills) {
  Pool p = pool_of(4);
  const double waiting[] = {0, 64, 200, 32};
  for (int i = 0; i < 4; ++i) p.endpoints[i].metrics.waiting_queue_size = waiting[i];
  p.endpoints[0].dispatched_since_scrape = 32;
  LoadAwareScorer llmd(128, false);
  // 0.5; 0.5 x (1 - 64/128) = 0.25; 200 capped at 128 -> 0; 0.5 x (1 - 32/128) = 0.375
  expect_scores(run(llmd, p, Request{}), {0.5, 0.25, 0.0, 0.375});
  LoadAwareScorer counted(128, true);
  // a: 0 waiting + 32 sent since the scrape -> 0.375
  expect_scores(run(counted, p, Request{}), {0.375, 0.25, 0.0, 0.375});
  CandidateColumns cols;
  cols.assign(p.all());
  std::vector<double> out(4);
  CycleState cycle;
  counted.score_columns(cycle, Request{}, p.all(), cols, out);
  expect_scores(out, {0.375, 0.25, 0.0, 0.375});
}

// Schedules a cold request with the LRU scorer and dispatches it to `to`.
std::vector<double> cold_round(NoHitLruScorer& s, const Pool& p, const Endpoint* to) {
  CycleState cycle;
  const Request r = request(64, 4);
  auto scores = run(s, cycle, r, p.all());
  SchedulingResult res;
  if (to) res.serving.push_back(to);
  s.pre_request(cycle, r, res);
  return scores;
}

TEST(NoHitLruScorer, ColdRequestsGoToTheEndpointsLongestWithoutOne) {
  Pool p = pool_of(4);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  NoHitLruScorer s(&prefix, 1024);
  // Nothing used: 1 - i/3 in candidate order.
  auto first = cold_round(s, p, &p.endpoints[0]);
  EXPECT_DOUBLE_EQ(first[0], 1.0);
  EXPECT_DOUBLE_EQ(first[1], 2.0 / 3);
  EXPECT_DOUBLE_EQ(first[2], 1.0 / 3);
  EXPECT_DOUBLE_EQ(first[3], 0.0);
  // LRU [a]: never used b, c, d -> 1, 2/3, 1/3; a rank 3 + 0 -> 0.
  auto second = cold_round(s, p, &p.endpoints[1]);
  EXPECT_DOUBLE_EQ(second[0], 0.0);
  EXPECT_DOUBLE_EQ(second[1], 1.0);
  EXPECT_DOUBLE_EQ(second[2], 2.0 / 3);
  EXPECT_DOUBLE_EQ(second[3], 1.0 / 3);
  // LRU [a, b]: c, d -> 1, 2/3; a rank 2 -> 1/3; b rank 3 -> 0.
  auto third = cold_round(s, p, nullptr);
  EXPECT_DOUBLE_EQ(third[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(third[1], 0.0);
  EXPECT_DOUBLE_EQ(third[2], 1.0);
  EXPECT_DOUBLE_EQ(third[3], 2.0 / 3);
  EXPECT_EQ(s.lru(), (std::vector<std::uint32_t>{0, 1}));
  // Candidates b, c, d only (llm-d ranks by the whole LRU): c, d -> 1, 0.5;
  // b rank 2 + 1 = 3 -> 1 - 3/2 < 0 -> 0.
  CycleState cycle;
  auto some = run(s, cycle, request(64, 4), {&p.endpoints[1], &p.endpoints[2], &p.endpoints[3]});
  expect_scores(some, {0.0, 1.0, 0.5});
  // One candidate scores 1.
  CycleState one;
  expect_scores(run(s, one, request(64, 4), {&p.endpoints[1]}), {1.0});
}

TEST(NoHitLruScorer, AWarmRequestIsNeutralAndLeavesTheLru) {
  Pool p = pool_of(3);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  cache(prefix, 2, 1);
  NoHitLruScorer s(&prefix, 1024);
  CycleState cycle;
  const Request warm = request(64, 4);  // c holds its first block
  expect_scores(run(s, cycle, warm, p.all()), {0.5, 0.5, 0.5});
  SchedulingResult res;
  res.serving.push_back(&p.endpoints[2]);
  s.pre_request(cycle, warm, res);
  EXPECT_TRUE(s.lru().empty());
  // Warm on a non-candidate only: cold for these candidates (llm-d checks the candidates).
  CycleState c2;
  auto scores = run(s, c2, warm, {&p.endpoints[0], &p.endpoints[1]});
  expect_scores(scores, {1.0, 0.0});
}

TEST(NoHitLruScorer, TheLruHoldsAtMostLruSizeEndpoints) {
  Pool p = pool_of(3);
  ApproxPrefixCacheProducer prefix(PrefixParams{});
  NoHitLruScorer s(&prefix, 2);
  for (int i = 0; i < 3; ++i) cold_round(s, p, &p.endpoints[i]);
  // a, the oldest, was dropped: it counts as never used again.
  EXPECT_EQ(s.lru(), (std::vector<std::uint32_t>{1, 2}));
  auto scores = cold_round(s, p, nullptr);
  // never used: a -> 1; b rank 1 + 0 -> 0.5; c rank 1 + 1 -> 0
  expect_scores(scores, {1.0, 0.5, 0.0});
}

struct AffinityFixture {
  Pool p = pool_of(3);
  ApproxPrefixCacheProducer prefix{PrefixParams{}};
  InFlightLoadProducer load{InFlightLoadParams{}, nullptr};
  std::vector<CycleState> busy{8};
  std::size_t used = 0;
  AffinityFixture() {
    cache(prefix, 0, 4);  // a: 4 of 4 blocks, ratio 1 (sticky at 0.8)
    cache(prefix, 1, 3);  // b: 3 of 4, ratio 0.75 (not sticky at 0.8)
  }
  void load_on(int e, std::uint64_t tokens) {
    dispatch(load, busy.at(used++), request(tokens), p.endpoints[e]);
  }
  // The addresses' last digits the filter keeps, for `params`.
  std::vector<std::uint32_t> kept(AffinityParams params, std::vector<const Endpoint*> eps = {}) {
    PrefixCacheAffinityFilter f(params, &prefix, &load, 1);
    if (eps.empty()) eps = p.all();
    CycleState cycle;
    f.filter(cycle, request(64, 4), eps);
    std::vector<std::uint32_t> out;
    for (const Endpoint* e : eps) out.push_back(e->index);
    return out;
  }
};

TEST(PrefixCacheAffinityFilter, KeepsTheStickyEndpointsWhileTheyKeepUp) {
  AffinityFixture f;
  AffinityParams a;  // llm-d's defaults: 0.8, TTFT gate 18000 ms at 15928 tokens/s
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0}));
  a.affinity_threshold = 0.75;  // b's 3/4 is sticky too (>=)
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1}));
  a.affinity_threshold = 0;  // 0: the filter is off
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1, 2}));
  a = AffinityParams{};
  a.exploration_probability = 1;  // always explores
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1, 2}));
  // One candidate: kept whatever it holds.
  EXPECT_EQ(f.kept(AffinityParams{}, {&f.p.endpoints[2]}), (std::vector<std::uint32_t>{2}));
  // No sticky candidate: all kept.
  EXPECT_EQ(f.kept(AffinityParams{}, {&f.p.endpoints[1], &f.p.endpoints[2]}),
            (std::vector<std::uint32_t>{1, 2}));
}

TEST(PrefixCacheAffinityFilter, TheTtftGateBreaksStickinessPastTheMaxPenalty) {
  AffinityFixture f;
  AffinityParams a;
  a.peak_prefill_throughput = 1000;  // tokens/s: TTFT = tokens in flight x 1 ms
  a.max_ttft_penalty_ms = 500;
  f.load_on(0, 400);  // a: 400 ms; best other (b, c idle): 0 ms; 400 <= 500
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0}));
  f.load_on(0, 200);  // a: 600 ms, 600 - 0 > 500: everyone kept
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1, 2}));
  f.load_on(1, 150);  // best other is c, still 0 ms: broken
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1, 2}));
  f.load_on(2, 150);  // best other 150 ms: 600 - 150 = 450 <= 500: sticky again
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0}));
  a.max_ttft_penalty_ms = 0;  // 0: always stick
  f.load_on(0, 100000);
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0}));
}

TEST(PrefixCacheAffinityFilter, TheTokenGateBreaksStickinessPastTheMaxTokens) {
  AffinityFixture f;
  AffinityParams a;
  a.max_ttft_penalty_ms = 0;  // the optimized-baseline guide's shape
  a.max_tokens_in_flight_penalty = 1000;
  f.load_on(0, 1300);
  f.load_on(1, 400);
  f.load_on(2, 600);
  // best sticky 1300 - best other 400 = 900 <= 1000: a only
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0}));
  f.load_on(0, 200);  // 1500 - 400 = 1100 > 1000: everyone
  EXPECT_EQ(f.kept(a), (std::vector<std::uint32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace sluice::scheduling
