// llm-d's prefill/decode and topology plugins (issue 40, item 3):
// always-disagg-pd-decider, context-length-aware, topology-extractor,
// topology-affinity-filter and -scorer. Expected scores are worked by hand
// from llm-d's definitions (context_length_aware.go, topologyaffinity/
// scorer.go, util/topology/level.go); the arithmetic is in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/always_disagg_pd_decider.h"
#include "scheduling/plugins/by_label_filter.h"
#include "scheduling/plugins/context_length_aware.h"
#include "scheduling/plugins/disagg_profile_handler.h"
#include "scheduling/plugins/label_cache.h"
#include "scheduling/plugins/topology_affinity.h"
#include "scheduling_test_util.h"
#include "support/fixture_text.h"
#include "unit/config_errors.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::unique_ptr<Scheduler> build(const std::string& yaml) {
  return build_scheduler(config::load_config_string(yaml, "test.yaml"));
}

std::string build_error(const std::string& yaml) {
  return unit::config_error_of([&] { build(yaml); }, "(no error)");
}

std::string header(const SchedulingResult& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

std::vector<std::string> addresses(const std::vector<const Endpoint*>& eps) {
  std::vector<std::string> out;
  for (const auto* e : eps) out.push_back(e->address);
  return out;
}

// --- context-length-aware -------------------------------------------------

TEST(ContextLengthAware, ParsesMinMaxRangesAsLlmd) {
  auto r = parse_context_range("0-2048");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->min, 0u);
  EXPECT_EQ(r->max, 2048u);
  r = parse_context_range(" 2048 - 8192 ");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->min, 2048u);
  EXPECT_EQ(r->max, 8192u);
  for (const char* bad : {"", "2048", "a-b", "10-5", "1-2-3", "-5-10", "1.5-3", "-"})
    EXPECT_FALSE(parse_context_range(bad)) << bad;
}

TEST(ContextLengthAware, ScoresHandWorked) {
  // In range 0-2048 at 1000 tokens: width 2048, width score
  // 1 / (1 + 0.2048) = 0.830013, headroom 1048 / 2048 = 0.511719,
  // raw 0.7 x 0.830013 + 0.3 x 0.511719 = 0.734525, score
  // 0.3 + 0.7 x 0.734525 = 0.814167.
  EXPECT_NEAR(context_range_score(1000, {0, 2048}), 0.814167, 1e-6);
  // In range 2048-8192 at 5000: width 6144, 1 / 1.6144 = 0.619425,
  // headroom 3192 / 6144 = 0.519531, raw 0.433598 + 0.155859 = 0.589457,
  // score 0.3 + 0.412620 = 0.712620.
  EXPECT_NEAR(context_range_score(5000, {2048, 8192}), 0.712620, 1e-6);
  // Out of range 2048-131072 at 1000: distance 1048, 0.3 / 2.048 = 0.146484375.
  EXPECT_DOUBLE_EQ(context_range_score(1000, {2048, 131072}), 0.146484375);
  // Above 0-2048 at 5000: distance 2952, 0.3 / 3.952 = 0.075911.
  EXPECT_NEAR(context_range_score(5000, {0, 2048}), 0.075911, 1e-6);
  // A zero-width range that holds the length: 1.
  EXPECT_DOUBLE_EQ(context_range_score(100, {100, 100}), 1.0);
  // Bounds are inclusive: at max the headroom is 0 -> 0.3 + 0.7 x 0.7 x 0.830013.
  EXPECT_NEAR(context_range_score(2048, {0, 2048}), 0.706707, 1e-6);
}

TEST(ContextLengthAware, ScorerNoLabelHalfBadLabelZero) {
  ContextLengthAware p(std::string(ContextLengthAware::kDefaultLabel), false);
  Pool pool;
  const std::string label(ContextLengthAware::kDefaultLabel);
  pool.add("short:1", {{label, "0-2048"}});
  pool.add("long:1", {{label, "2048-131072"}});
  pool.add("none:1");
  pool.add("bad:1", {{label, "lots"}});
  Request r;
  r.input_tokens = 1000;
  CycleState cycle;
  auto eps = pool.all();
  std::vector<double> s(eps.size());
  p.score(cycle, r, eps, s);
  EXPECT_NEAR(s[0], 0.814167, 1e-6);
  EXPECT_DOUBLE_EQ(s[1], 0.146484375);
  EXPECT_DOUBLE_EQ(s[2], 0.5);
  EXPECT_DOUBLE_EQ(s[3], 0.0);
}

// With filtering on, the scorer of the same cycle reuses what the filter
// read of each label; the scores are the hand-worked ones above. In a later
// cycle without the filter, it reads the labels again (a label changed in
// between counts).
TEST(LabelCache, DerivesOncePerSlotAndLabelsVersion) {
  LabelCache<std::string> cache;
  Pool pool;
  pool.add("a:1", {{"k", "x"}});
  pool.add("b:1", {{"k", "y"}});
  int derived = 0;
  auto value = [&](const Endpoint& e) {
    return cache.get(e, [&](const Endpoint& x) {
      ++derived;
      return x.labels.at("k");
    });
  };
  EXPECT_EQ(value(pool.endpoints[0]), "x");
  EXPECT_EQ(value(pool.endpoints[1]), "y");
  EXPECT_EQ(value(pool.endpoints[0]), "x");
  EXPECT_EQ(derived, 2);  // the second read of slot 0 derived nothing
  pool.endpoints[0].labels["k"] = "z";
  pool.endpoints[0].labels_version = 1;
  EXPECT_EQ(value(pool.endpoints[0]), "z");
  EXPECT_EQ(value(pool.endpoints[1]), "y");
  EXPECT_EQ(derived, 3);
  EXPECT_EQ(cache.slots(), 2u);
  cache.clear();
  EXPECT_EQ(value(pool.endpoints[1]), "y");
  EXPECT_EQ(derived, 4);
}

// Inside a scheduler the label readers find a candidate's row by its
// address in the cycle's array; a candidate from anywhere else (none in
// sluice today) is read the slow way, not mistaken for a row.
TEST(LabelCache, AnAttachedReaderReadsAnEndpointOutsideItsViewTheSlowWay) {
  const std::string role(kRoleLabel);
  const std::string range(ContextLengthAware::kDefaultLabel);
  Pool view_pool;
  view_pool.add("a:1", {{role, "prefill"}, {range, "0-2048"}});
  view_pool.add("b:1", {{role, "decode"}, {range, "4096-8192"}});
  std::vector<Endpoint> arr = view_pool.copy();
  const PoolView view{arr.data(), arr.size(), 1};
  Pool other;
  other.add("c:1", {{role, "prefill"}, {range, "4096-8192"}});
  other.add("d:1", {{role, "decode"}, {range, "0-2048"}});
  Request r;
  r.input_tokens = 1000;
  CycleState cycle;
  auto prefill = ByLabelFilter::prefill();
  prefill->attach(&view);
  std::vector<const Endpoint*> c = {&arr[0], &other.endpoints[0], &arr[1], &other.endpoints[1]};
  prefill->filter(cycle, r, c);
  EXPECT_EQ(c, (std::vector<const Endpoint*>{&arr[0], &other.endpoints[0]}));
  // The first candidate outside the view comes first, then the view's.
  c = {&other.endpoints[1], &arr[0], &other.endpoints[0], &arr[1]};
  prefill->filter(cycle, r, c);
  EXPECT_EQ(c, (std::vector<const Endpoint*>{&arr[0], &other.endpoints[0]}));
  ContextLengthAware ctx(range, true);
  ctx.attach(&view);
  c = {&arr[1], &other.endpoints[1], &arr[0], &other.endpoints[0]};
  std::vector<double> s(c.size());
  ctx.score(cycle, r, c, s);
  // 1000 tokens: out of 4096-8192 by 3096, in 0-2048 (hand-worked above).
  EXPECT_NEAR(s[0], 0.3 / (1 + 3.096), 1e-9);
  EXPECT_NEAR(s[1], 0.814167, 1e-6);
  EXPECT_NEAR(s[2], 0.814167, 1e-6);
  EXPECT_NEAR(s[3], 0.3 / (1 + 3.096), 1e-9);
  ctx.filter(cycle, r, c);
  EXPECT_EQ(c, (std::vector<const Endpoint*>{&other.endpoints[1], &arr[0]}));
}

TEST(ContextLengthAware, ScorerAfterTheFilterScoresAsAloneAndReadsLabelsAnewWhenTheyChange) {
  ContextLengthAware p(std::string(ContextLengthAware::kDefaultLabel), true);
  Pool pool;
  const std::string label(ContextLengthAware::kDefaultLabel);
  pool.add("short:1", {{label, "0-2048"}});
  pool.add("none:1");
  pool.add("long:1", {{label, "2048-131072"}});
  Request r;
  r.input_tokens = 1000;
  CycleState cycle;
  auto eps = pool.all();
  p.filter(cycle, r, eps);
  ASSERT_EQ(eps.size(), 2u);  // long:1 dropped: 1000 is out of its range
  std::vector<double> s(eps.size());
  p.score(cycle, r, eps, s);
  EXPECT_NEAR(s[0], 0.814167, 1e-6);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
  pool.endpoints[0].labels[label] = "lots";  // unparseable now
  pool.endpoints[0].labels_version = 7;      // as the pool's writer marks a change
  CycleState next;
  p.score(next, r, eps, s);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
}

TEST(ContextLengthAware, FilterOnlyWithEnableFiltering) {
  const std::string label = "ctx";
  Pool pool;
  pool.add("short:1", {{label, "0-2048"}});
  pool.add("long:1", {{label, "2048-131072"}});
  pool.add("none:1");
  pool.add("bad:1", {{label, "2048"}});
  Request r;
  r.input_tokens = 1000;
  CycleState cycle;
  auto eps = pool.all();
  ContextLengthAware off(label, false);
  off.filter(cycle, r, eps);
  EXPECT_EQ(eps.size(), 4u);
  ContextLengthAware on(label, true);
  on.filter(cycle, r, eps);
  // In range and unlabelled stay; out of range and unparseable go.
  EXPECT_EQ(addresses(eps), (std::vector<std::string>{"short:1", "none:1"}));
  // 2048 is in both ranges (inclusive bounds).
  eps = pool.all();
  r.input_tokens = 2048;
  on.filter(cycle, r, eps);
  EXPECT_EQ(addresses(eps), (std::vector<std::string>{"short:1", "long:1", "none:1"}));
}

TEST(ContextLengthAware, ConfigErrorsNameThePluginFieldAndLine) {
  const std::string empty_label = R"(plugins:
- type: context-length-aware
  parameters:
    label: ""
)";
  EXPECT_NE(build_error(empty_label)
                .find("test.yaml:4: plugins[context-length-aware].parameters.label: must not be "
                      "empty"),
            std::string::npos)
      << build_error(empty_label);
  const std::string bad_bool = R"(plugins:
- type: context-length-aware
  parameters:
    enableFiltering: sometimes
)";
  EXPECT_NE(build_error(bad_bool).find(
                "test.yaml:4: plugins[context-length-aware].parameters.enableFiltering"),
            std::string::npos)
      << build_error(bad_bool);
  const std::string unknown = R"(plugins:
- type: context-length-aware
  parameters:
    labels: ctx
)";
  EXPECT_NE(build_error(unknown).find(
                "test.yaml:4: plugins[context-length-aware].parameters.labels: unknown field"),
            std::string::npos)
      << build_error(unknown);
}

// Inside a scheduler context-length-aware groups the view's endpoints by
// distinct range and decides and scores each range once a cycle. The
// oracle: the plain computation from each candidate's own label (parse it,
// score it: no label 0.5, unparseable 0; keep what holds the length or has
// no label), candidate by candidate. Seeded random pools with shared,
// distinct, zero-width, unparseable and absent ranges and bounds near
// 2^64, lengths at and around the bounds, candidates in any order and some
// from outside the view, the filter then the scorer of the same cycle, the
// scorer alone, and a change of labels between passes.
TEST(ContextLengthAware, GroupedRangesFilterAndScoreAsEachLabelAlone) {
  std::mt19937_64 rng(40);
  const std::string label(ContextLengthAware::kDefaultLabel);
  const std::uint64_t bounds[] = {0,
                                  1,
                                  100,
                                  2047,
                                  2048,
                                  2049,
                                  8192,
                                  131072,
                                  std::numeric_limits<std::uint64_t>::max() - 1,
                                  std::numeric_limits<std::uint64_t>::max()};
  auto bound = [&] {
    return bounds[rng() % std::size(bounds)] + (rng() % 4 == 0 ? rng() % 50 : 0);
  };
  auto labelled = [&](Endpoint& e) {
    e.labels.clear();
    const int kind = static_cast<int>(rng() % 8);
    if (kind == 0) return;  // no label
    if (kind == 1) {
      e.labels[label] = rng() % 2 ? "lots" : "10-5";  // does not parse
      return;
    }
    std::uint64_t lo = bound(), hi = bound();
    if (lo > hi) std::swap(lo, hi);
    e.labels[label] = std::to_string(lo) + "-" + std::to_string(hi);
  };
  auto plain_score = [&](const Endpoint& e, std::uint64_t length) {
    auto it = e.labels.find(label);
    if (it == e.labels.end()) return 0.5;
    const auto r = parse_context_range(it->second);
    return r ? context_range_score(length, *r) : 0.0;
  };
  auto plain_keeps = [&](const Endpoint& e, std::uint64_t length) {
    auto it = e.labels.find(label);
    if (it == e.labels.end()) return true;
    const auto r = parse_context_range(it->second);
    return r && length >= r->min && length <= r->max;
  };
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    std::vector<Endpoint> pool(1 + rng() % 40);
    // A few ranges shared by many endpoints, as pools have, or each its own.
    std::vector<Labels> shared(1 + rng() % 4);
    for (auto& l : shared) {
      Endpoint e;
      labelled(e);
      l = e.labels;
    }
    const bool few = rng() % 2 != 0;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      pool[i].index = static_cast<std::uint32_t>(i);
      if (few)
        pool[i].labels = shared[rng() % shared.size()];
      else
        labelled(pool[i]);
    }
    Pool outside;
    for (int i = 0; i < 3; ++i) {
      Endpoint& e = outside.add("out:" + std::to_string(i));
      e.index = 1000 + static_cast<std::uint32_t>(i);
      labelled(e);
    }
    PoolView view{pool.data(), pool.size(), 1};
    ContextLengthAware viewed(label, true);
    viewed.attach(&view);
    for (int pass = 0; pass < 4; ++pass) {
      if (pass == 2) {  // labels change: a new epoch, as the scheduler would mark it
        labelled(pool[rng() % pool.size()]);
        for (auto& e : pool) e.labels_version += 1;
        view.labels_epoch += 1;
      }
      std::vector<const Endpoint*> cands;
      for (auto& e : pool)
        if (rng() % 4 != 0) cands.push_back(&e);
      if (rng() % 2) cands.push_back(&outside.endpoints[rng() % 3]);
      std::shuffle(cands.begin(), cands.end(), rng);
      if (cands.empty()) continue;
      Request r;
      r.input_tokens = rng() % 3 == 0 ? bound() : rng() % 140000;
      CycleState cycle;
      // The scorer alone, over every candidate.
      std::vector<double> got(cands.size());
      viewed.score(cycle, r, cands, got);
      for (std::size_t i = 0; i < cands.size(); ++i)
        EXPECT_EQ(got[i], plain_score(*cands[i], r.input_tokens)) << i;
      // The filter, then the scorer over what it kept.
      auto kept = cands;
      viewed.filter(cycle, r, kept);
      std::vector<const Endpoint*> want;
      for (const Endpoint* e : cands)
        if (plain_keeps(*e, r.input_tokens)) want.push_back(e);
      EXPECT_EQ(kept, want);
      got.assign(kept.size(), -1);
      viewed.score(cycle, r, kept, got);
      for (std::size_t i = 0; i < kept.size(); ++i)
        EXPECT_EQ(got[i], plain_score(*kept[i], r.input_tokens));
    }
  }
}

// --- always-disagg-pd-decider and the context-length-aware P/D guide ------

// llm-d/llm-d guides/context-length-aware-pd/router.values.yaml's
// EndpointPickerConfig, as the guides' fixtures hold it.
const std::string kContextLengthPd = test_support::llmd_fixture("context-length-aware-pd.yaml");

Labels prefill_range(const char* range) {
  return {{"llm-d.ai/role", "prefill"}, {"llm-d.ai/context-length-range", range}};
}

TEST(AlwaysDisaggPdDecider, AlwaysDisaggregates) {
  AlwaysDisaggPdDecider d;
  CycleState cycle;
  Request r;  // no tokens, nothing at all
  Endpoint e;
  EXPECT_TRUE(d.disaggregate(cycle, r, e));
}

TEST(ContextLengthAwarePd, GuideConfigSendsPrefillByLength) {
  auto s = build(kContextLengthPd);
  ASSERT_EQ(s->profiles().size(), 2u);
  Pool pool;
  pool.add("p-short:1", prefill_range("0-2048"));
  pool.add("p-long:1", prefill_range("2049-131072"));
  pool.add("d1:1", {{"llm-d.ai/role", "decode"}});
  auto eps = pool.copy();
  for (std::uint64_t tokens : {1u, 500u, 2048u, 2049u, 9000u}) {
    SCOPED_TRACE(tokens);
    Request r;
    r.input_tokens = tokens;  // even 1 token: always-disagg
    CycleState cycle;
    SchedulingResult res;
    s->schedule(cycle, r, eps, res);
    ASSERT_TRUE(res.ok) << res.error;
    EXPECT_EQ(res.targets[0]->address, "d1:1");
    EXPECT_EQ(header(res, "x-prefiller-host-port"), tokens <= 2048 ? "p-short:1" : "p-long:1");
  }
  // Beyond every range: the filter leaves no prefill endpoint, so decode
  // does the prefill itself (the handler's rule), not an error.
  Request r;
  r.input_tokens = 200000;
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.targets[0]->address, "d1:1");
  EXPECT_EQ(header(res, "x-prefiller-host-port"), "");
}

// llm_d_epp_disagg_decision_total (llm-d's disagg/metrics.go, counted where
// its handler's stages end): one decision per answer with a decode endpoint,
// prefill-decode when a prefill endpoint takes part, else decode-only; the
// model "unknown" when the request names none. With the guide's config:
// 3 x "llama" at 100 tokens -> prefill-decode 3; "llama" at 200000 tokens
// (no prefill range holds it) -> decode-only 1; no model, 100 tokens ->
// unknown prefill-decode 1; no decode endpoint -> no decision.
TEST(DisaggDecisions, CountedByModelAndTypeAsLlmd) {
  auto s = build(kContextLengthPd);
  Pool pool;
  pool.add("p-short:1", prefill_range("0-2048"));
  pool.add("d1:1", {{"llm-d.ai/role", "decode"}});
  auto eps = pool.copy();
  auto send = [&](std::string model, std::uint64_t tokens, std::span<const Endpoint> to) {
    Request r;
    r.model = std::move(model);
    r.input_tokens = tokens;
    CycleState cycle;
    SchedulingResult res;
    s->schedule(cycle, r, to, res);
    return res.ok;
  };
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(send("llama", 100, eps));
  EXPECT_TRUE(send("llama", 200000, eps));
  EXPECT_TRUE(send("", 100, eps));
  EXPECT_FALSE(send("llama", 100, std::span<const Endpoint>(eps).first(1)));
  const DisaggProfileHandler* h = nullptr;
  for (const auto& p : s->plugins())
    if (auto* d = dynamic_cast<const DisaggProfileHandler*>(p.get())) h = d;
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->decisions().size(), 2u);
  const auto& llama = h->decisions().at("llama");
  EXPECT_EQ(llama.prefill_decode, 3u);
  EXPECT_EQ(llama.decode_only, 1u);
  const auto& unknown = h->decisions().at("unknown");
  EXPECT_EQ(unknown.prefill_decode, 1u);
  EXPECT_EQ(unknown.decode_only, 0u);
}

// Model names are the client's: past 100 of them, new ones are summed
// under "(other)" (m0..m99 named, m100 and m101 -> (other) 2).
TEST(DisaggDecisions, ModelNamesAreBounded) {
  DisaggProfileHandler h("decode", "prefill", nullptr, TopologyParams{});
  Profile decode;
  decode.name = "decode";
  Endpoint e;
  e.address = "d:1";
  ProfileResult res;
  res.profile = &decode;
  res.ok = true;
  res.targets = {&e};
  CycleState cycle;
  for (int i = 0; i < 102; ++i) {
    Request r;
    r.model = "m" + std::to_string(i);
    ASSERT_TRUE(h.process_results(cycle, r, std::span<const ProfileResult>(&res, 1)).ok);
  }
  EXPECT_EQ(h.decisions().size(), 101u);
  EXPECT_EQ(h.decisions().at("m99").decode_only, 1u);
  EXPECT_EQ(h.decisions().count("m100"), 0u);
  EXPECT_EQ(h.decisions().at("(other)").decode_only, 2u);
}

TEST(AlwaysDisaggPdDecider, UnknownParameterIsAConfigError) {
  const std::string yaml = R"(plugins:
- type: always-disagg-pd-decider
  parameters:
    nonCachedTokens: 16
)";
  EXPECT_NE(build_error(yaml).find("test.yaml:4: plugins[always-disagg-pd-decider].parameters."
                                   "nonCachedTokens: unknown field"),
            std::string::npos)
      << build_error(yaml);
}

// --- topology -------------------------------------------------------------

Labels topo(const char* host, const char* rack, const char* zone, const char* region) {
  Labels l;
  if (*host) l["kubernetes.io/hostname"] = host;
  if (*rack) l["topology.kubernetes.io/rack"] = rack;
  if (*zone) l["topology.kubernetes.io/zone"] = zone;
  if (*region) l["topology.kubernetes.io/region"] = region;
  return l;
}

// The peer (decode) on h1/r1/z1/g1 and candidates at every level.
struct TopologyPool {
  Pool pool;
  TopologyPool() {
    pool.add("peer:1", topo("h1", "r1", "z1", "g1"));
    pool.add("same-host:1", topo("h1", "r1", "z1", "g1"));
    pool.add("same-rack:1", topo("h2", "r1", "z1", "g1"));
    pool.add("same-zone:1", topo("h3", "r2", "z1", "g1"));
    pool.add("same-region:1", topo("h4", "r3", "z2", "g1"));
    pool.add("far:1", topo("h5", "r4", "z3", "g2"));
    pool.add("bare:1");
    // Rack r1 in another zone: llm-d compares each level on its own, so
    // this is still "rack" (no outer level is required to match).
    pool.add("rack-name-elsewhere:1", topo("h6", "r1", "z9", "g9"));
  }
  const Endpoint* peer() const { return &pool.endpoints[0]; }
  std::vector<const Endpoint*> candidates() const {
    auto all = pool.all();
    all.erase(all.begin());
    return all;
  }
};

TEST(TopologyExtractor, ComparesAtTheTightestSharedLevel) {
  TopologyExtractor x(TopologyExtractor::default_labels());
  TopologyPool t;
  const auto c = t.candidates();
  const TopologyLevel want[] = {TopologyLevel::kHost,   TopologyLevel::kRack, TopologyLevel::kZone,
                                TopologyLevel::kRegion, TopologyLevel::kNone, TopologyLevel::kNone,
                                TopologyLevel::kRack};
  ASSERT_EQ(c.size(), std::size(want));
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(x.compare(*t.peer(), *c[i]), want[i]) << c[i]->address;
  EXPECT_FALSE(x.has_topology(*c[5]));
  // Empty never matches empty.
  Endpoint a, b;
  a.labels = {{"kubernetes.io/hostname", ""}};
  b.labels = {{"kubernetes.io/hostname", ""}};
  EXPECT_EQ(x.compare(a, b), TopologyLevel::kNone);
}

// The filter's bounded comparison (it reads labels only up to its
// minAffinity): a level looser than the bound counts as none, a tighter one
// as itself.
TEST(TopologyExtractor, ComparesNoLooserThanTheBound) {
  TopologyExtractor x(TopologyExtractor::default_labels());
  TopologyPool t;
  const auto c = t.candidates();  // same-host, same-rack, same-zone, same-region, far, bare, ...
  const auto at = x.values(*t.peer());
  EXPECT_EQ(x.compare(at, *c[0], TopologyLevel::kHost), TopologyLevel::kHost);
  EXPECT_EQ(x.compare(at, *c[1], TopologyLevel::kHost), TopologyLevel::kNone);
  EXPECT_EQ(x.compare(at, *c[1], TopologyLevel::kRack), TopologyLevel::kRack);
  EXPECT_EQ(x.compare(at, *c[2], TopologyLevel::kRack), TopologyLevel::kNone);
  EXPECT_EQ(x.compare(at, *c[2], TopologyLevel::kZone), TopologyLevel::kZone);
  EXPECT_EQ(x.compare(at, *c[3], TopologyLevel::kZone), TopologyLevel::kNone);
  EXPECT_EQ(x.compare(at, *c[3], TopologyLevel::kRegion), TopologyLevel::kRegion);
  EXPECT_EQ(x.compare(at, *c[6], TopologyLevel::kRack), TopologyLevel::kRack);
}

TEST(TopologyExtractor, LabelNamesFromParameters) {
  // Empty means the default, as llm-d.
  auto s = build(R"(plugins:
- type: topology-extractor
  parameters: {hostname: node, rack: rack, zone: "", region: ""}
- type: topology-affinity-scorer
- type: decode-filter
)");
  ASSERT_EQ(s->profiles()[0].scorers.size(), 1u);
  auto* scorer = dynamic_cast<TopologyAffinityScorer*>(s->profiles()[0].scorers[0].scorer);
  ASSERT_NE(scorer, nullptr);
  ASSERT_NE(scorer->extractor(), nullptr);
  const TopologyExtractor& x = *scorer->extractor();
  EXPECT_EQ(x.labels(),
            (TopologyExtractor::LabelNames{"node", "rack", "topology.kubernetes.io/zone",
                                           "topology.kubernetes.io/region"}));
  Endpoint a, b;
  a.labels = {{"node", "n1"}, {"rack", "r1"}};
  b.labels = {{"node", "n2"}, {"rack", "r1"}};
  EXPECT_EQ(x.compare(a, b), TopologyLevel::kRack);
}

TEST(TopologyAffinityScorer, LevelCurveHandWorked) {
  TopologyExtractor x(TopologyExtractor::default_labels());
  TopologyAffinityScorer s(&x);
  TopologyPool t;
  const auto c = t.candidates();
  Request r;
  CycleState cycle;
  std::vector<double> out(c.size(), -1);
  // No peer (no prefill after decode): all 0.
  s.score(cycle, r, c, out);
  for (double v : out) EXPECT_EQ(v, 0.0);
  cycle.put(kPeerEndpointKey, t.peer());
  s.score(cycle, r, c, out);
  // host 1, rack 0.2, zone 0.05, region 0.02, none 0, no labels 0, rack 0.2.
  EXPECT_EQ(out, (std::vector<double>{1.0, 0.2, 0.05, 0.02, 0.0, 0.0, 0.2}));
  // Without an extractor there is no topology: all 0.
  TopologyAffinityScorer blind(nullptr);
  blind.score(cycle, r, c, out);
  for (double v : out) EXPECT_EQ(v, 0.0);
}

TEST(TopologyAffinityFilter, KeepsAtLeastMinAffinityAndFailsOpen) {
  TopologyExtractor x(TopologyExtractor::default_labels());
  TopologyPool t;
  Request r;
  CycleState cycle;
  auto run = [&](TopologyLevel min, std::vector<const Endpoint*> eps) {
    TopologyAffinityFilter f(&x, min);
    f.filter(cycle, r, eps);
    return addresses(eps);
  };
  // No peer: unchanged.
  EXPECT_EQ(run(TopologyLevel::kHost, t.candidates()).size(), 7u);
  cycle.put(kPeerEndpointKey, t.peer());
  EXPECT_EQ(run(TopologyLevel::kHost, t.candidates()), (std::vector<std::string>{"same-host:1"}));
  EXPECT_EQ(run(TopologyLevel::kRack, t.candidates()),
            (std::vector<std::string>{"same-host:1", "same-rack:1", "rack-name-elsewhere:1"}));
  EXPECT_EQ(run(TopologyLevel::kZone, t.candidates()),
            (std::vector<std::string>{"same-host:1", "same-rack:1", "same-zone:1",
                                      "rack-name-elsewhere:1"}));
  EXPECT_EQ(run(TopologyLevel::kRegion, t.candidates()),
            (std::vector<std::string>{"same-host:1", "same-rack:1", "same-zone:1", "same-region:1",
                                      "rack-name-elsewhere:1"}));
  // None qualifies: fail open, every candidate stays.
  auto far = t.candidates();
  far = {far[4], far[5]};
  EXPECT_EQ(run(TopologyLevel::kRegion, far), (std::vector<std::string>{"far:1", "bare:1"}));
  // A peer without topology: unchanged.
  cycle.put(kPeerEndpointKey, &t.pool.endpoints[6]);
  EXPECT_EQ(run(TopologyLevel::kHost, t.candidates()).size(), 7u);
}

// Inside a scheduler the topology plugins mark the peer's groups of the
// view instead of comparing each candidate's values. The oracle: the same
// plugins alone (no view), which compare values candidate by candidate.
// Seeded random pools with shared, missing and empty values, the same
// string at two levels, candidates in any order and some from outside the
// view, every minAffinity, a change of labels between passes.
TEST(TopologyAffinity, MarkedGroupsChooseAndScoreAsComparedValues) {
  std::mt19937_64 rng(40);
  const auto labels = TopologyExtractor::default_labels();
  auto value = [&](std::size_t level) -> std::string {
    const int v = static_cast<int>(rng() % 5);
    if (v == 0) return "";   // empty: never shared
    if (v == 1) return "x";  // the same string at every level
    return std::string(1, static_cast<char>('a' + level)) + std::to_string(rng() % 3);
  };
  auto labelled = [&](Endpoint& e) {
    e.labels.clear();
    for (std::size_t l = 0; l < 4; ++l)
      if (rng() % 6 != 0) e.labels[labels[l]] = value(l);  // sometimes absent
  };
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    std::vector<Endpoint> pool(1 + rng() % 40);
    for (std::size_t i = 0; i < pool.size(); ++i) {
      pool[i].index = static_cast<std::uint32_t>(i);
      labelled(pool[i]);
    }
    Pool outside;
    for (int i = 0; i < 3; ++i) {
      Endpoint& e = outside.add("out:" + std::to_string(i));
      e.index =
          1000 + static_cast<std::uint32_t>(i);  // slots of their own (alone, rows are by slot)
      labelled(e);
    }
    TopologyExtractor viewed(labels), alone(labels);
    PoolView view{pool.data(), pool.size(), 1};
    viewed.attach(&view);
    const auto min = static_cast<TopologyLevel>(rng() % 4);
    TopologyAffinityFilter f_viewed(&viewed, min), f_alone(&alone, min);
    TopologyAffinityScorer s_viewed(&viewed), s_alone(&alone);
    for (int pass = 0; pass < 3; ++pass) {
      if (pass == 2) {  // labels change: a new epoch, as the scheduler would mark it
        labelled(pool[rng() % pool.size()]);
        for (auto& e : pool) e.labels_version += 1;
        view.labels_epoch += 1;
      }
      std::vector<const Endpoint*> cands;
      for (auto& e : pool)
        if (rng() % 4 != 0) cands.push_back(&e);
      if (rng() % 2) cands.push_back(&outside.endpoints[rng() % 3]);
      std::shuffle(cands.begin(), cands.end(), rng);
      if (cands.empty()) continue;
      const Endpoint* peer = rng() % 5 == 0 ? &outside.endpoints[0] : &pool[rng() % pool.size()];
      CycleState cycle;
      cycle.put(kPeerEndpointKey, peer);
      Request r;
      std::vector<double> got(cands.size()), want(cands.size());
      s_viewed.score(cycle, r, cands, got);
      s_alone.score(cycle, r, cands, want);
      EXPECT_EQ(got, want);
      auto kept_viewed = cands, kept_alone = cands;
      f_viewed.filter(cycle, r, kept_viewed);
      f_alone.filter(cycle, r, kept_alone);
      EXPECT_EQ(kept_viewed, kept_alone);
    }
  }
}

// llm-d-router deploy/config/pd-topology-epp-config.yaml, as published but
// for approx-prefix-cache-producer's maxPrefixTokensToMatch (issue 40, item
// 2, another change) and a decider that always disaggregates, so that every
// request here runs prefill.
const char* kPdTopology = R"(apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: approx-prefix-cache-producer
  parameters:
    lruCapacityPerServer: 31250
- type: prefix-cache-scorer
- type: queue-scorer
- type: prefill-filter
- type: decode-filter
- type: max-score-picker
- type: topology-extractor
- type: topology-affinity-filter
- type: topology-affinity-scorer
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: always-disagg-pd-decider
    topology: {enabled: false}
- type: always-disagg-pd-decider
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: topology-affinity-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
  - pluginRef: topology-affinity-scorer
    weight: 1
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
)";

Labels with_role(Labels l, const char* role) {
  l["llm-d.ai/role"] = role;
  return l;
}

TEST(TopologyAffinity, PdTopologyConfigPutsPrefillOnTheDecodeHost) {
  auto s = build(kPdTopology);
  Pool pool;
  // The same-host prefill is the busiest: the filter (minAffinity host)
  // still keeps only it.
  pool.add("p-other-host:1", with_role(topo("h2", "r1", "z1", "g1"), "prefill"));
  pool.add("p-same-host:1", with_role(topo("h1", "r1", "z1", "g1"), "prefill"))
      .metrics.waiting_queue_size = 9;
  pool.add("d1:1", with_role(topo("h1", "r1", "z1", "g1"), "decode"));
  auto eps = pool.copy();
  Request r;
  r.input_tokens = 10;
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.targets[0]->address, "d1:1");
  EXPECT_EQ(header(res, "x-prefiller-host-port"), "p-same-host:1");
}

TEST(TopologyAffinity, PublishedPdTopologyConfigLoads) {
  // The published decider (prefix-based-pd-decider) and no handler topology.
  std::string yaml = kPdTopology;
  yaml.replace(yaml.find("prefill: always-disagg-pd-decider"),
               std::strlen("prefill: always-disagg-pd-decider"),
               "prefill: prefix-based-pd-decider");
  yaml.replace(yaml.find("    topology: {enabled: false}\n"),
               std::strlen("    topology: {enabled: false}\n"), "");
  yaml.replace(yaml.find("- type: always-disagg-pd-decider\n"),
               std::strlen("- type: always-disagg-pd-decider\n"),
               "- type: prefix-based-pd-decider\n  parameters:\n    nonCachedTokens: 16\n");
  auto s = build(yaml);
  ASSERT_EQ(s->profiles().size(), 2u);
  EXPECT_EQ(s->profiles()[0].filters.size(), 2u);
  EXPECT_EQ(s->profiles()[0].scorers.size(), 3u);
}

TEST(TopologyAffinity, ConfigErrorsNameThePluginFieldAndLine) {
  const std::string bad_level = R"(plugins:
- type: topology-extractor
- type: topology-affinity-filter
  parameters:
    minAffinity: node
)";
  EXPECT_NE(build_error(bad_level).find(
                "test.yaml:5: plugins[topology-affinity-filter].parameters.minAffinity: "
                "'node' is not one of host, rack, zone, region"),
            std::string::npos)
      << build_error(bad_level);
  const std::string no_such_producer = R"(plugins:
- type: topology-extractor
- type: topology-affinity-scorer
  parameters:
    topologyProducerName: topo
)";
  EXPECT_NE(build_error(no_such_producer)
                .find("test.yaml:5: plugins[topology-affinity-scorer].parameters."
                      "topologyProducerName: 'topo' is not a declared topology-extractor"),
            std::string::npos)
      << build_error(no_such_producer);
  const std::string two = R"(plugins:
- type: topology-extractor
  name: a
- type: topology-extractor
  name: b
- type: topology-affinity-scorer
  parameters: {}
)";
  EXPECT_NE(build_error(two).find("plugins[topology-affinity-scorer].parameters: several "
                                  "topology-extractor plugins"),
            std::string::npos)
      << build_error(two);
  const std::string bad_label = R"(plugins:
- type: topology-extractor
  parameters:
    rack: [a, b]
)";
  EXPECT_NE(build_error(bad_label).find("test.yaml:4: plugins[topology-extractor].parameters.rack"),
            std::string::npos)
      << build_error(bad_label);
  const std::string unknown = R"(plugins:
- type: topology-extractor
  parameters:
    host: h
)";
  EXPECT_NE(build_error(unknown).find(
                "test.yaml:4: plugins[topology-extractor].parameters.host: unknown field"),
            std::string::npos)
      << build_error(unknown);
}

TEST(TopologyWarning, NoTopologyLabelOnAnyEndpointIsAWarning) {
  auto cfg = config::load_config_string(R"(plugins:
- type: topology-extractor
  parameters: {rack: rack}
- type: topology-affinity-scorer
)",
                                        "test.yaml");
  Labels none{{"llm-d.ai/role", "decode"}};
  Labels racked{{"rack", "r1"}};
  Labels zoned{{"topology.kubernetes.io/zone", "z1"}};
  std::vector<const Labels*> pool{&none};
  EXPECT_EQ(topology_warning(cfg, pool),
            "topology-affinity-scorer: no endpoint carries a topology label "
            "(kubernetes.io/hostname, rack, topology.kubernetes.io/zone, "
            "topology.kubernetes.io/region), so these plugins have no effect");
  pool.push_back(&racked);
  EXPECT_EQ(topology_warning(cfg, pool), "");
  pool = {&none, &zoned};
  EXPECT_EQ(topology_warning(cfg, pool), "");
  // An empty pool: nothing to say yet.
  EXPECT_EQ(topology_warning(cfg, {}), "");
  // No topology-extractor: no endpoint can have a topology.
  auto blind = config::load_config_string(
      "plugins:\n- type: topology-affinity-filter\n- type: decode-filter\n", "test.yaml");
  pool = {&zoned};
  EXPECT_NE(topology_warning(blind, pool).find("topology-affinity-filter: no topology-extractor"),
            std::string::npos);
  // The config's own endpoints, at startup.
  auto listed = config::load_config_string(R"(plugins:
- type: topology-extractor
- type: topology-affinity-filter
endpoints:
- address: 10.0.0.1:8000
  labels: {llm-d.ai/role: prefill}
)",
                                           "test.yaml");
  EXPECT_NE(topology_warning(listed).find("topology-affinity-filter: no endpoint carries a "
                                          "topology label (kubernetes.io/hostname, "),
            std::string::npos);
  auto zoned_list = config::load_config_string(R"(plugins:
- type: topology-extractor
- type: topology-affinity-filter
endpoints:
- address: 10.0.0.1:8000
  labels: {topology.kubernetes.io/zone: z1}
)",
                                               "test.yaml");
  EXPECT_EQ(topology_warning(zoned_list), "");
  // No topology plugin: nothing.
  auto plain = config::load_config_string("plugins:\n- type: queue-scorer\n", "test.yaml");
  pool = {&none};
  EXPECT_EQ(topology_warning(plain, pool), "");
}

}  // namespace
}  // namespace sluice::scheduling
