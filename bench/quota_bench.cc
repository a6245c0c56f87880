// Issue 41: what quotas add to a request's admission, in process. One
// reserve (the quota step: the owners found, each applying limit locked,
// checked and held) and one settle (each limit's window advanced and
// charged) per iteration, for a tenant with three limits (a minute's
// tokens, a day's tokens, a second's requests), against a tenant with no
// limit (the step finds nothing: quotas off). Arg: 0 one replica alone, 1
// leased from a fleet (the lease check instead of the window's).
#include <benchmark/benchmark.h>

#include <string>

#include "quota/quotas.h"

namespace {

using namespace sluice::quota;

Millis g_now = 1'796'601'600'000;
Millis now_ms() { return g_now; }

LimitDef limit(std::string name, Measure m, std::uint64_t amount, Period p) {
  LimitDef d;
  d.name = std::move(name);
  d.measure = m;
  d.amount = amount;
  d.period = p;
  return d;
}

void BM_QuotaReserveSettle(benchmark::State& state) {
  const bool limited = state.range(0) != 0;
  const bool leased = state.range(1) != 0;
  Quotas quotas(now_ms);
  QuotaPolicy policy;
  if (limited)
    policy.tenants["hot"] = {
        limit("tpm", Measure::kTokens, 1'000'000'000, {60'000, Calendar::kNone}),
        limit("daily", Measure::kTokens, 1'000'000'000'000, {0, Calendar::kDay}),
        limit("rps", Measure::kRequests, 1'000'000'000, {1'000, Calendar::kNone})};
  quotas.configure(policy);
  if (leased) {
    Ledger& l = quotas.ledger();
    l.set_fleet_mode(FleetMode::kLeased, 3);
    // A first request makes each limit busy; each gets a lease it never
    // runs out of in the run.
    std::string scratch;
    auto first = quotas.reserve(policy, "hot", "", "m", {200, 300}, g_now, scratch);
    for (const auto& ask : l.lease_asks(g_now, 10'000'000))
      l.lease_granted(ask, LeaseGrant{UINT64_MAX / 4, 0, 0, g_now, g_now + 1'000'000'000'000});
  }
  std::string scratch;
  const Usage worst{200, 300};
  for (auto _ : state) {
    g_now += 1;  // a request a millisecond: windows advance
    auto a = quotas.reserve(policy, "hot", "", "m", worst, g_now, scratch);
    a.admit.reservation.dispatched();
    a.admit.reservation.used(worst);
    a.admit.reservation.settle(g_now);
    benchmark::DoNotOptimize(a.limited);
  }
  state.SetLabel(!limited ? "quotas off" : leased ? "3 limits, leased" : "3 limits, alone");
}
BENCHMARK(BM_QuotaReserveSettle)->Args({0, 0})->Args({1, 0})->Args({1, 1});

}  // namespace

BENCHMARK_MAIN();
