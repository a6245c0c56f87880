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
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "scheduling/from_config.h"
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

}  // namespace

BENCHMARK_MAIN();
