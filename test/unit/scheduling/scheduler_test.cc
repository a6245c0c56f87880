// The scheduler built from config: GIE defaulting, published configs, the
// cycle, and prefill/decode disaggregation with topology.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iterator>
#include <random>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/disagg_profile_handler.h"
#include "scheduling/plugins/max_score_picker.h"
#include "scheduling/plugins/queue_scorer.h"
#include "scheduling/plugins/single_profile_handler.h"
#include "scheduling/prefix_hasher.h"
#include "scheduling_test_util.h"
#include "unit/config_errors.h"

namespace sluice::scheduling {
namespace {

using testing::Pool;

std::unique_ptr<Scheduler> build(const std::string& yaml) {
  return build_scheduler(config::load_config_string(yaml, "test.yaml"));
}

// Random load on an endpoint, every field the load scorers read, and room
// for about 70% of them.
void random_load(Endpoint& e, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  e.metrics.waiting_queue_size = std::floor(u(rng) * 20);
  e.dispatched_since_scrape = static_cast<std::uint32_t>(u(rng) * 4);
  e.metrics.running_requests_size = std::floor(u(rng) * 50);
  e.metrics.kv_cache_usage = u(rng);
  e.in_flight = static_cast<std::uint32_t>(u(rng) * 30);
  e.has_room = u(rng) > 0.3;
}

std::string build_error(const std::string& yaml) {
  return unit::config_error_of([&] { build(yaml); }, "(no error)");
}

TEST(BuildScheduler, DefaultProfileWhenTheConfigHasNone) {
  auto s = build("server: {listen: '127.0.0.1:0'}\n");
  ASSERT_EQ(s->profiles().size(), 1u);
  const Profile& p = s->profiles()[0];
  EXPECT_EQ(p.name, "default");
  ASSERT_EQ(p.scorers.size(), 3u);
  EXPECT_EQ(p.scorers[0].name, "queue-scorer");
  EXPECT_EQ(p.scorers[0].weight, 2);
  EXPECT_EQ(p.scorers[1].name, "kv-cache-utilization-scorer");
  EXPECT_EQ(p.scorers[1].weight, 2);
  EXPECT_EQ(p.scorers[2].name, "prefix-cache-scorer");
  EXPECT_EQ(p.scorers[2].weight, 3);
  EXPECT_EQ(p.picker_name, "max-score-picker");
  EXPECT_TRUE(s->preparation().prefix_hashes);
  EXPECT_EQ(s->preparation().block_size_tokens, 16u);
  EXPECT_EQ(s->preparation().max_prefix_blocks, 256u);
}

TEST(BuildScheduler, GieDefaultingWeightPickerHandler) {
  auto s = build(R"(
plugins:
- type: queue-scorer
- type: decode-filter
schedulingProfiles:
- name: only
  plugins:
  - pluginRef: decode-filter
  - pluginRef: queue-scorer
)");
  const Profile& p = s->profiles()[0];
  EXPECT_EQ(p.filters.size(), 1u);
  EXPECT_EQ(p.scorers[0].weight, 1);             // GIE: weight 1 when absent
  EXPECT_EQ(p.picker_name, "max-score-picker");  // added
  EXPECT_FALSE(s->preparation().prefix_hashes);
}

TEST(BuildScheduler, NoProfilesButPluginsMakesOneProfileOfThemAll) {
  auto s = build(R"(
plugins:
- type: kv-cache-utilization-scorer
- type: random-picker
  parameters: {maxNumOfEndpoints: 2}
)");
  ASSERT_EQ(s->profiles().size(), 1u);
  EXPECT_EQ(s->profiles()[0].scorers.size(), 1u);
  EXPECT_EQ(s->profiles()[0].picker_name, "random-picker");
}

TEST(BuildScheduler, PublishedConfigsLoadUnchanged) {
  // The shared GIE fixtures, when this checkout has them, and sluice's own.
  const bool shared = std::filesystem::is_directory(SLUICE_FIXTURES_DIR);
  if (!shared)
    std::printf("note: %s absent, checking only sluice's own fixtures\n", SLUICE_FIXTURES_DIR);
  std::vector<std::string> files;
  for (const char* dir : {SLUICE_FIXTURES_DIR, SLUICE_TEST_FIXTURES_DIR})
    if (std::filesystem::is_directory(dir))
      for (const auto& f : std::filesystem::directory_iterator(dir))
        if (f.path().extension() == ".yaml") files.push_back(f.path().string());
  ASSERT_GE(files.size(), shared ? 9u : 6u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    std::unique_ptr<Scheduler> s;
    ASSERT_NO_THROW(s = build_scheduler(config::load_config_file(f)));
    EXPECT_GE(s->profiles().size(), 1u);
  }
}

TEST(BuildScheduler, PdConfigBuildsDisaggregation) {
  auto s = build_scheduler(
      config::load_config_file(std::string(SLUICE_TEST_FIXTURES_DIR) + "/llmd-pd-epp-config.yaml"));
  ASSERT_EQ(s->profiles().size(), 2u);
  EXPECT_NE(s->plugin("disagg-profile-handler"), nullptr);
  EXPECT_TRUE(s->preparation().prefix_hashes);
}

TEST(BuildScheduler, BadConfigsNameTheFieldAndLine) {
  EXPECT_NE(build_error("plugins:\n- type: no-such-scorer\n")
                .find("test.yaml:2: plugins[0].type: unknown plugin type 'no-such-scorer'"),
            std::string::npos)
      << build_error("plugins:\n- type: no-such-scorer\n");
  const std::string two_pickers = R"(plugins:
- type: max-score-picker
- type: random-picker
schedulingProfiles:
- name: p
  plugins:
  - pluginRef: max-score-picker
  - pluginRef: random-picker
)";
  EXPECT_NE(build_error(two_pickers)
                .find("test.yaml:8: schedulingProfiles[p].plugins[1].pluginRef: profile 'p' "
                      "already has picker"),
            std::string::npos)
      << build_error(two_pickers);
  const std::string not_scheduling = R"(plugins:
- type: vtc-fairness-policy
schedulingProfiles:
- name: p
  plugins:
  - pluginRef: vtc-fairness-policy
)";
  EXPECT_NE(
      build_error(not_scheduling)
          .find("test.yaml:6: schedulingProfiles[p].plugins[0].pluginRef: 'vtc-fairness-policy' is "
                "a vtc-fairness-policy, not a filter, scorer or picker"),
      std::string::npos)
      << build_error(not_scheduling);
  const std::string no_handler = R"(plugins:
- type: queue-scorer
schedulingProfiles:
- name: a
  plugins: [{pluginRef: queue-scorer}]
- name: b
  plugins: [{pluginRef: queue-scorer}]
)";
  EXPECT_NE(build_error(no_handler).find("2 profiles but no profile handler configured"),
            std::string::npos)
      << build_error(no_handler);
  const std::string bad_param = R"(plugins:
- type: max-score-picker
  parameters:
    maxNumOfEndpoint: 2
)";
  EXPECT_NE(
      build_error(bad_param).find(
          "test.yaml:4: plugins[max-score-picker].parameters.maxNumOfEndpoint: unknown field"),
      std::string::npos)
      << build_error(bad_param);
  const std::string bad_decider = R"(plugins:
- type: disagg-profile-handler
  parameters:
    deciders: {prefill: nope}
schedulingProfiles:
- name: decode
  plugins: []
)";
  EXPECT_NE(build_error(bad_decider).find("deciders: 'nope' is not a declared P/D decider plugin"),
            std::string::npos)
      << build_error(bad_decider);
}

TEST(Scheduler, FilterLeavingNoEndpointEndsTheProfileWithAnError) {
  auto s = build(R"(
plugins:
- type: prefill-filter
schedulingProfiles:
- name: p
  plugins: [{pluginRef: prefill-filter}]
)");
  Pool pool;
  pool.add("a");
  auto eps = pool.copy();
  CycleState cycle;
  SchedulingResult r;
  s->schedule(cycle, {}, eps, r);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("filter 'prefill-filter' left no endpoint"), std::string::npos) << r.error;
}

TEST(Scheduler, DefaultProfilePrefersTheCachedPrefixAndRecordsIt) {
  auto s = build("{}\n");
  Pool pool;
  for (int i = 0; i < 3; ++i) pool.add("10.0.0." + std::to_string(i) + ":8000");
  auto eps = pool.copy();
  Request r;
  r.model = "m";
  compute_prefix_hashes(std::string(64 * 8, 's'), r.model, s->preparation(), r);
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok) << res.error;
  const Endpoint* first = res.targets[0];
  s->dispatched(cycle, r, res);
  cycle.clear();
  // Equal load everywhere: the prefix wins every time now.
  for (int i = 0; i < 20; ++i) {
    s->schedule(cycle, r, eps, res);
    ASSERT_TRUE(res.ok);
    EXPECT_EQ(res.targets[0]->index, first->index);
    cycle.clear();
  }
  // Unless that endpoint is loaded: queue 2 + kv 2 outweigh prefix 3.
  eps[first->index].metrics.waiting_queue_size = 10;
  eps[first->index].metrics.kv_cache_usage = 0.9;
  s->schedule(cycle, r, eps, res);
  EXPECT_NE(res.targets[0]->index, first->index);
  EXPECT_GT(s->cycle_timing().count.load(), 0u);
}

TEST(Scheduler, RequireRoomSkipsFullEndpoints) {
  auto s = build("{}\n");
  Pool pool;
  pool.add("a").has_room = false;
  pool.add("b");
  auto eps = pool.copy();
  s->set_require_room(true);
  CycleState cycle;
  SchedulingResult res;
  for (int i = 0; i < 10; ++i) {
    s->schedule(cycle, {}, eps, res);
    ASSERT_TRUE(res.ok);
    EXPECT_EQ(res.targets[0]->address, "b");
  }
  eps[1].has_room = false;
  s->schedule(cycle, {}, eps, res);
  EXPECT_FALSE(res.ok);
}

// The scorers read the candidates' columns, built while the endpoints with
// room are picked out and again after filters. Against an oracle that reads
// the endpoint records: with room gaps and a filter that keeps every other
// endpoint, the picked endpoint is the argmax of the weighted min-max
// scores computed from the records themselves.
TEST(Scheduler, ColumnsStayAlignedWithCandidatesThroughRoomAndFilters) {
  // The same four weighted scorers, with the filter in front or without.
  const auto profile = [](bool filtered) {
    std::string y = "plugins:\n";
    if (filtered) y += "- type: by-label\n  parameters: {label: pool, validValues: [a]}\n";
    y += R"(- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: running-requests-size-scorer
- type: in-flight-requests-scorer
- type: max-score-picker
schedulingProfiles:
- name: p
  plugins:
)";
    if (filtered) y += "  - {pluginRef: by-label}\n";
    y += R"(  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv-cache-utilization-scorer, weight: 3}
  - {pluginRef: running-requests-size-scorer, weight: 1}
  - {pluginRef: in-flight-requests-scorer, weight: 5}
  - {pluginRef: max-score-picker}
)";
    return y;
  };
  auto s = build(profile(true));
  auto plain = build(profile(false));
  s->set_require_room(true);
  plain->set_require_room(true);
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 200; ++round) {
    Pool pool;
    for (int i = 0; i < 40; ++i) {
      auto& e =
          pool.add("10.0.0." + std::to_string(i) + ":8000", {{"pool", i % 2 == 0 ? "a" : "b"}});
      random_load(e, rng);
    }
    auto eps = pool.copy();
    for (bool filtered : {true, false}) {
      std::vector<const Endpoint*> cand;
      for (const auto& e : eps)
        if (e.has_room && (!filtered || e.labels.at("pool") == "a")) cand.push_back(&e);
      if (cand.empty()) continue;
      const auto minmax = [&](auto value) {
        std::vector<double> out;
        double lo = 1e300, hi = -1e300;
        for (const Endpoint* e : cand) lo = std::min(lo, value(*e)), hi = std::max(hi, value(*e));
        for (const Endpoint* e : cand) out.push_back(hi > lo ? (hi - value(*e)) / (hi - lo) : 1.0);
        return out;
      };
      const auto q = minmax([](const Endpoint& e) {
        return e.metrics.waiting_queue_size + e.dispatched_since_scrape;
      });
      const auto r = minmax([](const Endpoint& e) { return e.metrics.running_requests_size; });
      const auto f = minmax([](const Endpoint& e) { return double(e.in_flight); });
      std::size_t best = 0;
      double best_score = -1, second = -1;
      for (std::size_t i = 0; i < cand.size(); ++i) {
        const double v =
            (2 * q[i] + 3 * (1 - cand[i]->metrics.kv_cache_usage) + r[i] + 5 * f[i]) / 11;
        if (v > best_score) {
          second = best_score;
          best_score = v;
          best = i;
        } else {
          second = std::max(second, v);
        }
      }
      if (best_score - second < 1e-9) continue;  // a tie: the picker may take either
      CycleState cycle;
      SchedulingResult res;
      (filtered ? s : plain)->schedule(cycle, {}, eps, res);
      ASSERT_TRUE(res.ok) << res.error;
      EXPECT_EQ(res.targets[0]->index, cand[best]->index)
          << "round " << round << " filtered " << filtered;
    }
  }
}

// ---------------------------------------------------------------- P/D

const char* kPd = R"(
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: prefill-filter
- type: decode-filter
- type: max-score-picker
- type: prefix-based-pd-decider
  parameters:
    nonCachedTokens: 16
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: prefix-based-pd-decider
    topology:
      margin: MARGIN
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
)";

std::unique_ptr<Scheduler> build_pd(double margin) {
  std::string y = kPd;
  y.replace(y.find("MARGIN"), 6, std::to_string(margin));
  return build(y);
}

Labels role(const char* r, const char* zone, const char* rack) {
  return {
      {"llm-d.ai/role", r}, {"topology.kubernetes.io/zone", zone}, {"block", "b1"}, {"rack", rack}};
}

std::string header(const SchedulingResult& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

TEST(DisaggProfileHandler, ShortPromptDecodesOnly) {
  auto s = build_pd(0.1);
  Pool pool;
  pool.add("p1:1", role("prefill", "z", "r1"));
  pool.add("d1:1", role("decode", "z", "r1"));
  auto eps = pool.copy();
  Request r;
  r.input_tokens = 10;  // below nonCachedTokens
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.primary_profile, "decode");
  EXPECT_EQ(res.targets[0]->address, "d1:1");
  EXPECT_EQ(header(res, "x-prefiller-host-port"), "");
}

TEST(DisaggProfileHandler, LongUncachedPromptGetsAPrefillEndpoint) {
  auto s = build_pd(0.1);
  Pool pool;
  pool.add("p1:1", role("prefill", "z", "r1"));
  pool.add("d1:1", role("decode", "z", "r1"));
  auto eps = pool.copy();
  Request r;
  compute_prefix_hashes(std::string(4 * 400, 'a'), "m", s->preparation(), r);
  r.input_tokens = 400;
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.targets[0]->address, "d1:1");  // decode is primary
  EXPECT_EQ(header(res, "x-prefiller-host-port"), "p1:1");
  s->dispatched(cycle, r, res);
  cycle.clear();
  // Now cached on the decode endpoint: the uncached part is below 16 tokens.
  s->schedule(cycle, r, eps, res);
  ASSERT_TRUE(res.ok);
  EXPECT_EQ(header(res, "x-prefiller-host-port"), "");
}

// Prefill p-far (rack r2) scores best, p-near (rack r1, same as the decode
// endpoint) slightly worse: within the margin the rack-sharing pair wins;
// with no margin the individually best pair does.
TEST(DisaggProfileHandler, TopologyMarginPrefersTheSameRack) {
  for (double margin : {0.0, 0.2}) {
    SCOPED_TRACE(margin);
    auto s = build_pd(margin);
    Pool pool;
    pool.add("p-far:1", role("prefill", "z", "r2")).metrics.waiting_queue_size = 0;
    pool.add("p-near:1", role("prefill", "z", "r1")).metrics.waiting_queue_size = 2;
    pool.add("p-other-zone:1", role("prefill", "z9", "r1")).metrics.waiting_queue_size = 10;
    pool.add("d1:1", role("decode", "z", "r1"));
    auto eps = pool.copy();
    Request r;
    compute_prefix_hashes(std::string(4 * 400, 'a'), "m", s->preparation(), r);
    r.input_tokens = 400;
    CycleState cycle;
    SchedulingResult res;
    s->schedule(cycle, r, eps, res);
    ASSERT_TRUE(res.ok) << res.error;
    EXPECT_EQ(res.targets[0]->address, "d1:1");
    // Queue scores over the prefill candidates: p-far 1.0, p-near 0.8,
    // other 0; prefix 0 for all; weights 2+1 -> p-far 1/3, p-near 0.267.
    // Pair means differ by 0.033: inside 0.2, outside 0.
    EXPECT_EQ(header(res, "x-prefiller-host-port"), margin > 0 ? "p-near:1" : "p-far:1");
    EXPECT_EQ(res.serving.size(), 2u);
  }
}

TEST(DisaggProfileHandler, SharedLevelsAreHierarchical) {
  DisaggProfileHandler h("decode", "prefill", nullptr, TopologyParams{});
  Endpoint a, b;
  a.labels = {{"topology.kubernetes.io/zone", "z"}, {"block", "b1"}, {"rack", "r1"}};
  b.labels = {{"topology.kubernetes.io/zone", "z"}, {"block", "b2"}, {"rack", "r1"}};
  EXPECT_EQ(h.shared_levels(a, b), 1);  // same rack name in another block is not the same rack
  b.labels["block"] = "b1";
  EXPECT_EQ(h.shared_levels(a, b), 3);
  b.labels.erase("topology.kubernetes.io/zone");
  EXPECT_EQ(h.shared_levels(a, b), 0);
}

// The pairing groups prefill endpoints by topology key instead of scanning
// every decode x prefill pair. The oracle is that scan, written here as
// the handler defines it: per level from the deepest, the best-scoring pair
// sharing that level (first among equals in decode, then prefill order;
// never one endpoint twice), taken if within the margin of the individually
// best pair. Random pools with tied scores, missing labels and endpoints in
// both roles.
TEST(DisaggProfileHandler, GroupedPairingChoosesWhatThePairwiseScanChooses) {
  TopologyParams topo;
  topo.margin = 0.15;
  DisaggProfileHandler h("decode", "prefill", nullptr, topo);
  Profile decode_profile, prefill_profile;
  decode_profile.name = "decode";
  prefill_profile.name = "prefill";
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int moved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    std::deque<Endpoint> eps;
    for (int i = 0; i < 24; ++i) {
      Endpoint e;
      e.address = "e" + std::to_string(i) + ":1";
      // Zones z0..z1, blocks b0..b1, racks r0..r2; sometimes a level is unlabelled.
      if (pick(8)) e.labels["topology.kubernetes.io/zone"] = "z" + std::to_string(pick(2));
      if (pick(8)) e.labels["block"] = "b" + std::to_string(pick(2));
      if (pick(8)) e.labels["rack"] = "r" + std::to_string(pick(3));
      eps.push_back(std::move(e));
    }
    ProfileResult dr, pr;
    dr.profile = &decode_profile;
    pr.profile = &prefill_profile;
    dr.ok = pr.ok = true;
    // Scores from a small set: ties are common. Endpoints 8..15 in both roles.
    for (std::size_t i = 0; i < 16; ++i)
      dr.scored.push_back(ScoredEndpoint{&eps[i], pick(5) / 4.0});
    for (std::size_t i = 8; i < 24; ++i)
      pr.scored.push_back(ScoredEndpoint{&eps[i], pick(5) / 4.0});
    auto first_best = [](const ProfileResult& r) {
      const ScoredEndpoint* b = &r.scored.front();
      for (const auto& s : r.scored)
        if (s.score > b->score) b = &s;
      return b;
    };
    const ScoredEndpoint* d0 = first_best(dr);
    const ScoredEndpoint* p0 = first_best(pr);
    dr.targets = {d0->endpoint};
    pr.targets = {p0->endpoint};
    // The oracle.
    const Endpoint *want_d = d0->endpoint, *want_p = p0->endpoint;
    const double best = (d0->score + p0->score) / 2;
    for (int want = 3; want > h.shared_levels(*d0->endpoint, *p0->endpoint); --want) {
      const Endpoint *bd = nullptr, *bp = nullptr;
      double bs = -1;
      for (const auto& ds : dr.scored)
        for (const auto& ps : pr.scored) {
          if (ds.endpoint == ps.endpoint || h.shared_levels(*ds.endpoint, *ps.endpoint) < want)
            continue;
          if ((ds.score + ps.score) / 2 > bs) {
            bs = (ds.score + ps.score) / 2;
            bd = ds.endpoint;
            bp = ps.endpoint;
          }
        }
      if (bd && bs >= best - topo.margin - 1e-12) {
        want_d = bd;
        want_p = bp;
        break;
      }
    }
    moved += want_d != d0->endpoint || want_p != p0->endpoint;
    CycleState cycle;
    Request r;
    std::vector<ProfileResult> results{dr, pr};
    SchedulingResult res = h.process_results(cycle, r, results);
    ASSERT_TRUE(res.ok) << res.error;
    ASSERT_EQ(res.serving.size(), 2u);
    EXPECT_EQ(res.serving[0], want_d);
    EXPECT_EQ(res.serving[1], want_p);
  }
  // The trials exercise the pairing, not only the individually best pair.
  EXPECT_GT(moved, 30);
}

TEST(DisaggProfileHandler, NoDecodeEndpointIsAnError) {
  auto s = build_pd(0.1);
  Pool pool;
  pool.add("p1:1", role("prefill", "z", "r1"));
  auto eps = pool.copy();
  CycleState cycle;
  SchedulingResult res;
  s->schedule(cycle, {}, eps, res);
  EXPECT_FALSE(res.ok);
  EXPECT_NE(res.error.find("failed to find available decode workers"), std::string::npos)
      << res.error;
}

}  // namespace
}  // namespace sluice::scheduling

// The cycle's weighted sum runs an AVX2 build where the CPU has it: both
// builds must give the same totals to the bit (the picks and their
// tie-breaks must not depend on the machine), including for scores out of
// [0, 1], NaN, infinities and subnormals, and for lengths that leave a tail.
// (In the sanitizer builds CI runs, neither loop is vectorized -- the
// checks per element prevent it -- so there this holds the two builds'
// scalar code to the reference; a Release build runs the vector code.
// Vectorizing does not change an element's arithmetic: no reassociation,
// no FMA.)
TEST(SchedulerSum, AvxAndGenericBuildsAgreeToTheBit) {
  // Without AVX2 only the generic build is held to the reference.
  const bool avx2 = sluice::scheduling::detail::cpu_has_avx2();
  std::mt19937_64 rng(3);
  const double specials[] = {
      std::nan(""), INFINITY,           -INFINITY,         -0.0, 0.0, 1.0, 1e-310,
      -1e-310,      1.0000000000000002, 0.9999999999999999};
  for (std::size_t n : {0u, 1u, 3u, 4u, 5u, 7u, 64u, 513u}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> row(n), a(n), b(n), ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        row[i] = rng() % 4 == 0 ? specials[rng() % std::size(specials)]
                                : std::uniform_real_distribution<double>(-0.5, 1.5)(rng);
        a[i] = b[i] = ref[i] = std::uniform_real_distribution<double>(0, 3)(rng);
      }
      const double w = std::uniform_real_distribution<double>(0, 1)(rng);
      const bool first = trial % 2 == 0;
      sluice::scheduling::detail::add_weighted_for_test(avx2, row.data(), w, first, a.data(), n);
      sluice::scheduling::detail::add_weighted_for_test(false, row.data(), w, first, b.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const double v = std::isnan(row[i]) ? 0.0 : std::min(1.0, std::max(0.0, row[i]));
        ref[i] = (first ? 0.0 : ref[i]) + w * v;
        ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << n << " " << i << " " << row[i];
        ASSERT_EQ(std::memcmp(&a[i], &ref[i], sizeof(double)), 0) << n << " " << i << " " << row[i];
      }
    }
  }
}

namespace sluice::scheduling {
namespace {

using testing::Pool;

// A scorer from outside sluice that keeps the default columns_read (every
// column) and checks each column it is given against the records.
class ColumnChecker final : public Plugin, public ColumnScorer {
 public:
  std::string_view type() const override { return "column-checker"; }
  void score_columns(CycleState&, const Request&, std::span<const Endpoint* const> candidates,
                     const CandidateColumns& c, std::span<double> scores) override {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const Endpoint& e = *candidates[i];
      mismatches += c.slot[i] != e.index;
      mismatches += c.queue[i] != e.metrics.waiting_queue_size + e.dispatched_since_scrape;
      mismatches += c.running[i] != e.metrics.running_requests_size;
      mismatches += c.kv_usage[i] != e.metrics.kv_cache_usage;
      mismatches += c.in_flight[i] != static_cast<double>(e.in_flight);
      scores[i] = 0;
      ++rows;
    }
  }
  int mismatches = 0, rows = 0;
};

// A cycle builds only the columns its scorers read (the stores were most
// of the pass that builds them): one scorer's column for a profile of it,
// every column once a scorer keeps the default, and those are then right.
TEST(Scheduler, BuildsTheColumnsItsScorersReadAndAllForAScorerThatDoesNotSay) {
  EXPECT_EQ(build("plugins:\n- type: queue-scorer\n- type: max-score-picker\n"
                  "schedulingProfiles:\n- name: p\n  plugins:\n"
                  "  - {pluginRef: queue-scorer}\n  - {pluginRef: max-score-picker}\n")
                ->columns_built(),
            CandidateColumns::kQueue);
  EXPECT_EQ(build("{}\n")->columns_built(),  // the default profile: queue, KV cache, prefix
            CandidateColumns::kQueue | CandidateColumns::kKvUsage | CandidateColumns::kSlot);

  std::vector<std::unique_ptr<Plugin>> plugins;
  auto queue = std::make_unique<QueueScorer>();
  auto checker = std::make_unique<ColumnChecker>();
  auto picker = std::make_unique<MaxScorePicker>(1, 7);
  auto handler = std::make_unique<SingleProfileHandler>();
  Profile p;
  p.name = "p";
  p.scorers.push_back({queue.get(), 1.0, "queue-scorer"});
  p.scorers.push_back({checker.get(), 1.0, "column-checker"});
  p.picker = picker.get();
  p.picker_name = "max-score-picker";
  ColumnChecker* check = checker.get();
  ProfileHandler* h = handler.get();
  plugins.push_back(std::move(queue));
  plugins.push_back(std::move(checker));
  plugins.push_back(std::move(picker));
  plugins.push_back(std::move(handler));
  Scheduler s(std::move(plugins), {p}, h, "single-profile-handler", {}, {true});
  EXPECT_EQ(s.columns_built(), CandidateColumns::kAll);
  std::mt19937_64 rng(9);
  for (int round = 0; round < 50; ++round) {
    Pool pool;
    for (int i = 0; i < 30; ++i) {
      auto& e = pool.add("10.0.1." + std::to_string(i) + ":8000");
      random_load(e, rng);
    }
    auto eps = pool.copy();
    CycleState cycle;
    Request req;
    SchedulingResult result;
    s.schedule(cycle, req, eps, result);
  }
  EXPECT_GT(check->rows, 500);
  EXPECT_EQ(check->mismatches, 0);
}

}  // namespace
}  // namespace sluice::scheduling
