// Scheduler micro-benchmarks (Google Benchmark).
//
//   BM_DefaultProfileCycle/E   one scheduling cycle with the default profile
//                              (queue 2, kv-cache 2, prefix-cache 3,
//                              max-score-picker) over E endpoints with
//                              varied metrics and a populated prefix index,
//                              including the post-dispatch index update.
//                              Reports p50/p99 ns per cycle.
//   BM_PrefixHashAndScore/T    a prompt of T tokens (4 characters each):
//                              chained xxHash of its blocks (on the I/O
//                              thread in sluice) plus the prefix-cache
//                              lookup and scoring over 64 endpoints.
//   BM_Plugin/K                one scheduling cycle over 512 endpoints with
//                              the profile of case K (plugin_cases(): each
//                              plugin of issue 40 beside today's queue,
//                              kv-cache and prefix-cache scorers, or in a
//                              P/D prefill profile; whole profiles), the
//                              post-dispatch update, and the completion of
//                              the request sent 64 cycles before (load
//                              producers keep 64 requests in flight).
//                              Reports the cycle's p50/p99 ns and, from the
//                              scheduler's per-plugin timing, the ns per
//                              cycle spent in the plugin under test
//                              (plugin_ns) and in today's scorers and
//                              prefill-filter of the same cycles. The
//                              prefix match the prefix plugins share
//                              (approx-prefix-cache-producer's, computed
//                              once a cycle by whichever asks first) is
//                              timed on its own before the cycle
//                              (match_ns), so each plugin's figure is its
//                              own work whichever runs first.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "scheduling/from_config.h"
#include "scheduling/plugins/approx_prefix_cache_producer.h"
#include "scheduling/prefix_hasher.h"

namespace {

using namespace sluice::scheduling;
using Steady = std::chrono::steady_clock;

std::vector<Endpoint> make_pool(int n, std::mt19937_64& rng) {
  std::vector<Endpoint> eps(static_cast<std::size_t>(n));
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) {
    auto& e = eps[static_cast<std::size_t>(i)];
    e.index = static_cast<std::uint32_t>(i);
    e.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":8000";
    e.metrics.waiting_queue_size = std::floor(u(rng) * 8);
    e.metrics.running_requests_size = std::floor(u(rng) * 32);
    e.metrics.kv_cache_usage = u(rng);
    e.metrics.update_time = Clock::now();
    e.stale = false;
    e.has_room = true;
  }
  return eps;
}

std::string prompt_for(int family, std::size_t chars) {
  std::string s = "family " + std::to_string(family) + ": ";
  while (s.size() < chars)
    s += "the quick brown fox jumps over the lazy dog " + std::to_string(family) + " ";
  s.resize(chars);
  return s;
}

void report(benchmark::State& state, std::vector<double>& ns) {
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p90_ns"] = ns[ns.size() * 90 / 100];
  state.counters["p99_ns"] = ns[ns.size() * 99 / 100];
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_DefaultProfileCycle(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto scheduler = build_scheduler(sluice::config::load_config_string("{}\n", "bench"));
  scheduler->set_require_room(true);
  std::mt19937_64 rng(42);
  auto pool = make_pool(n, rng);
  // 32 prompt families of 2k tokens; the index learns them as requests go.
  std::vector<Request> requests(32);
  for (int f = 0; f < 32; ++f) {
    requests[static_cast<std::size_t>(f)].model = "m";
    requests[static_cast<std::size_t>(f)].input_tokens = 2048;
    compute_prefix_hashes(prompt_for(f, 2048 * 4), "m", scheduler->preparation(),
                          requests[static_cast<std::size_t>(f)]);
  }
  CycleState cycle;
  SchedulingResult result;
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::size_t i = 0;
  for (auto _ : state) {
    const Request& r = requests[i++ % requests.size()];
    const auto t0 = Steady::now();
    scheduler->schedule(cycle, r, pool, result);
    scheduler->dispatched(cycle, r, result);
    cycle.clear();
    const auto t1 = Steady::now();
    benchmark::DoNotOptimize(result.targets.data());
    if (ns.size() < ns.capacity())
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  report(state, ns);
}
BENCHMARK(BM_DefaultProfileCycle)->Arg(8)->Arg(64)->Arg(512);

void BM_PrefixHashAndScore(benchmark::State& state) {
  const std::size_t tokens = static_cast<std::size_t>(state.range(0));
  auto scheduler = build_scheduler(sluice::config::load_config_string("{}\n", "bench"));
  scheduler->set_require_room(true);
  std::mt19937_64 rng(7);
  auto pool = make_pool(64, rng);
  const std::string prompt = prompt_for(1, tokens * 4);
  // Warm the index: the prompt's prefix is cached on a few endpoints.
  {
    Request r;
    r.model = "m";
    compute_prefix_hashes(prompt, "m", scheduler->preparation(), r);
    CycleState c;
    SchedulingResult res;
    for (int k = 0; k < 4; ++k) {
      scheduler->schedule(c, r, pool, res);
      res.serving = {&pool[static_cast<std::size_t>(k * 7)]};
      scheduler->dispatched(c, r, res);
      c.clear();
    }
  }
  CycleState cycle;
  SchedulingResult result;
  Request r;
  r.model = "m";
  std::vector<double> ns;
  ns.reserve(1 << 20);
  for (auto _ : state) {
    const auto t0 = Steady::now();
    compute_prefix_hashes(prompt, "m", scheduler->preparation(), r);
    scheduler->schedule(cycle, r, pool, result);
    cycle.clear();
    const auto t1 = Steady::now();
    benchmark::DoNotOptimize(result.targets.data());
    if (ns.size() < ns.capacity())
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  report(state, ns);
}
BENCHMARK(BM_PrefixHashAndScore)->Arg(1024)->Arg(32 * 1024)->Arg(128 * 1024);

// Issue 40's per-decision cost: each plugin alone in a profile over 512
// endpoints (today's scorers first), then whole profiles. `plugin` names
// the plugin whose own timing is reported (empty for a whole profile).
struct PluginCase {
  std::string label;
  std::string plugin;
  std::string yaml;
};

// The load and prefix plugins' producers, declared as llm-d's guides do.
constexpr const char* kProducers =
    "- type: inflight-load-producer\n"
    "- type: approx-prefix-cache-producer\n"
    "  parameters: {maxPrefixTokensToMatch: 4096}\n";

// Today's scorers as the default profile weighs them (queue 2, KV cache 2,
// prefix 3), as YAML profile entries.
constexpr const char* kTodaysScorers =
    "  - pluginRef: queue-scorer\n    weight: 2\n"
    "  - pluginRef: kv-cache-utilization-scorer\n    weight: 2\n"
    "  - pluginRef: prefix-cache-scorer\n    weight: 3\n";

// TYPE (PARAMS: its parameters line, or empty) in the default profile,
// beside today's scorers: every plugin meets the same pool and the same
// prefix index (routed mostly by today's scorers), and today's scorers'
// own cost is timed in the same cycles. Without TYPE: the default profile,
// spelled out.
PluginCase beside(const std::string& type, const std::string& params = "") {
  std::string yaml = "plugins:\n" + std::string(kProducers) +
                     "- type: queue-scorer\n- type: kv-cache-utilization-scorer\n"
                     "- type: prefix-cache-scorer\n";
  if (!type.empty()) yaml += "- type: " + type + "\n" + params;
  yaml += "schedulingProfiles:\n- name: default\n  plugins:\n";
  if (!type.empty()) yaml += "  - pluginRef: " + type + "\n";
  return {type.empty() ? "today's scorers (the default profile)" : type, type,
          yaml + kTodaysScorers};
}

// P/D over a pool where every endpoint has role "both": the decode profile
// picks by queue, then the prefill profile runs TYPE (and queue-scorer)
// over all 512 with that decode endpoint known. PAIRING: the handler's own
// topology pairing (sluice's, on by default) stays on; off, the cycle
// holds the plugins' cost alone.
PluginCase in_prefill(const std::string& type, bool pairing = false) {
  return {type + (pairing ? " (P/D, handler's pairing on)" : " (P/D prefill profile)"), type,
          "plugins:\n- type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
          "  parameters: {deciderPluginName: always-disagg-pd-decider, topology: {enabled: " +
              std::string(pairing ? "true" : "false") +
              "}}\n"
              "- type: prefill-filter\n- type: decode-filter\n- type: queue-scorer\n"
              "- type: topology-extractor\n- type: topology-affinity-filter\n"
              "  parameters: {minAffinity: rack}\n- type: topology-affinity-scorer\n"
              "schedulingProfiles:\n- name: decode\n  plugins:\n  - pluginRef: decode-filter\n"
              "  - pluginRef: queue-scorer\n- name: prefill\n  plugins:\n"
              "  - pluginRef: prefill-filter\n  - pluginRef: " +
              type + "\n  - pluginRef: queue-scorer\n"};
}

const std::vector<PluginCase>& plugin_cases() {
  static const std::vector<PluginCase> cases = {
      beside(""),
      beside("prefill-filter"),  // today's label-reading filter (by-label)
      beside("token-load-scorer"),
      beside("active-request-scorer"),
      beside("load-aware-scorer"),
      beside("no-hit-lru-scorer"),
      beside("prefix-cache-affinity-filter", "  parameters: {maxTTFTPenaltyMs: 18000}\n"),
      beside("context-length-aware", "  parameters: {enableFiltering: true}\n"),
      in_prefill("topology-affinity-filter"),
      in_prefill("topology-affinity-scorer"),
      {"default profile (no schedulingProfiles)", "", "{}\n"},
      {"llm-d optimized-baseline guide profile", "",
       "plugins:\n- type: token-load-scorer\n" + std::string(kProducers) +
           "- type: prefix-cache-affinity-filter\n"
           "  parameters: {affinityThreshold: 0.80, maxTokensInFlightPenalty: 286720, "
           "maxTTFTPenaltyMs: 0}\n"
           "schedulingProfiles:\n- name: default\n  plugins:\n"
           "  - pluginRef: prefix-cache-affinity-filter\n  - pluginRef: token-load-scorer\n"},
      {"llm-d optimized-baseline perf profile", "",
       "plugins:\n- type: queue-scorer\n- type: kv-cache-utilization-scorer\n"
       "- type: approx-prefix-cache-producer\n  parameters: {maxPrefixTokensToMatch: 4096}\n"
       "- type: prefix-cache-scorer\n- type: no-hit-lru-scorer\n"
       "schedulingProfiles:\n- name: default\n  plugins:\n"
       "  - pluginRef: queue-scorer\n    weight: 2\n"
       "  - pluginRef: kv-cache-utilization-scorer\n    weight: 2\n"
       "  - pluginRef: prefix-cache-scorer\n    weight: 3\n"
       "  - pluginRef: no-hit-lru-scorer\n    weight: 2\n"},
      in_prefill("topology-affinity-filter", true),
      in_prefill("topology-affinity-scorer", true),
  };
  return cases;
}

// make_pool's endpoints with what the new plugins read: requests in flight,
// role "both", a context-length range (half short, half long) and a
// topology of 8 endpoints a host, 4 hosts a rack, 4 racks a zone.
std::vector<Endpoint> make_labelled_pool(int n, std::mt19937_64& rng) {
  auto eps = make_pool(n, rng);
  std::uniform_int_distribution<std::uint32_t> in_flight(0, 32);
  for (auto& e : eps) {
    const std::uint32_t i = e.index;
    e.in_flight = in_flight(rng);
    e.labels["llm-d.ai/role"] = "both";
    e.labels["llm-d.ai/context-length-range"] = i % 2 ? "0-2048" : "2049-131072";
    e.labels["kubernetes.io/hostname"] = "host-" + std::to_string(i / 8);
    e.labels["topology.kubernetes.io/rack"] = "rack-" + std::to_string(i / 32);
    e.labels["topology.kubernetes.io/zone"] = "zone-" + std::to_string(i / 128);
    e.labels["topology.kubernetes.io/region"] = "region-1";
  }
  return eps;
}

// The ns spent in the named plugin's calls so far (as a filter and as a
// scorer, when it is both), per scheduling cycle.
double plugin_ns_per_cycle(const Scheduler& s, std::string_view name, std::int64_t cycles) {
  std::uint64_t sum = 0;
  for (const auto& t : s.timings())
    if (t->name == name) sum += t->sum_ns.load(std::memory_order_relaxed);
  return cycles > 0 ? static_cast<double>(sum) / static_cast<double>(cycles) : 0;
}

// One request in flight in BM_Plugin: its cycle and where it went.
struct InFlight {
  CycleState cycle;
  const Request* request = nullptr;
  std::uint32_t endpoint = 0;
};

void BM_Plugin(benchmark::State& state) {
  const PluginCase& c = plugin_cases()[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(c.label);
  auto scheduler = build_scheduler(sluice::config::load_config_string(c.yaml, "bench"));
  std::mt19937_64 rng(42);
  auto pool = make_labelled_pool(512, rng);
  std::vector<Request> requests(32);
  for (int f = 0; f < 32; ++f) {
    auto& r = requests[static_cast<std::size_t>(f)];
    r.model = "m";
    r.input_tokens = 1024 + 128 * static_cast<std::uint64_t>(f);  // both sides of 2048
    compute_prefix_hashes(prompt_for(f, r.input_tokens * 4), "m", scheduler->preparation(), r);
  }
  std::vector<InFlight> ring(64);
  SchedulingResult result;
  auto* prefix =
      dynamic_cast<ApproxPrefixCacheProducer*>(scheduler->plugin(ApproxPrefixCacheProducer::kType));
  std::chrono::nanoseconds match_time{0};
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::size_t i = 0;
  for (auto _ : state) {
    InFlight& slot = ring[i % ring.size()];
    const Request& r = requests[i++ % requests.size()];
    const auto t0 = Steady::now();
    if (slot.request) scheduler->completed(slot.cycle, *slot.request, slot.endpoint, 16);
    slot.cycle.clear();
    if (prefix) {
      const auto m0 = Steady::now();
      benchmark::DoNotOptimize(prefix->match(slot.cycle, r).total_blocks);
      match_time += Steady::now() - m0;
    }
    scheduler->schedule(slot.cycle, r, pool, result);
    scheduler->dispatched(slot.cycle, r, result);
    slot.request = result.ok ? &r : nullptr;
    if (result.ok) slot.endpoint = result.targets[0]->index;
    const auto t1 = Steady::now();
    benchmark::DoNotOptimize(result.targets.data());
    if (ns.size() < ns.capacity())
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  report(state, ns);
  const std::pair<const char*, std::string> timed[] = {{"plugin_ns", c.plugin},
                                                       {"queue_ns", "queue-scorer"},
                                                       {"kv_ns", "kv-cache-utilization-scorer"},
                                                       {"prefix_ns", "prefix-cache-scorer"},
                                                       {"prefill_filter_ns", "prefill-filter"}};
  for (const auto& [counter, name] : timed)
    if (!name.empty() && scheduler->plugin(name))
      state.counters[counter] = plugin_ns_per_cycle(*scheduler, name, state.iterations());
  if (prefix && state.iterations() > 0)
    state.counters["match_ns"] =
        static_cast<double>(match_time.count()) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Plugin)->DenseRange(0, static_cast<int>(plugin_cases().size()) - 1);

}  // namespace

BENCHMARK_MAIN();
