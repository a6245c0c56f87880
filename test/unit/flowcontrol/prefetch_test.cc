// Controller::for_each_prefetched, the dispatcher's pass over a batch of
// events with the enqueues' cache misses started a few events ahead: every
// event handled once, in order, and the decisions exactly those of the
// plain loop -- prefetching only loads memory -- above and below the flow
// count where it turns on.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"
#include "registry/flow_table.h"

namespace sluice::flowcontrol {
namespace {

struct Harness {
  explicit Harness(std::uint64_t slots, const std::string& fairness = "vtc-fairness-policy") {
    ControllerConfig cfg;
    cfg.registry.default_band.fairness = fairness;
    controller = std::make_unique<Controller>(
        cfg, std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, slots, 1000000, 0}),
        [this](const Decision& d) {
          decisions.push_back({d.cookie, d.ticket, static_cast<std::uint64_t>(d.outcome)});
          if (d.outcome == QueueOutcome::kDispatched) in_flight.push_back(d.ticket);
        });
    controller->set_endpoint_count(1);
  }
  std::unique_ptr<Controller> controller;
  std::vector<std::array<std::uint64_t, 3>> decisions;
  std::vector<std::uint64_t> in_flight;
  TimePoint now{};
};

// `flows` tenants, then rounds of: complete what is in flight, a batch of
// newcomers (some into new flows, some without a precomputed hash, some at
// another priority), release. Returns every decision.
std::vector<std::array<std::uint64_t, 3>> drive(
    int flows, bool prefetched, std::vector<std::size_t>* order, bool release_prefetch = true,
    const std::string& fairness = "vtc-fairness-policy") {
  Harness run(48, fairness);
  run.controller->set_release_prefetch(release_prefetch);
  std::mt19937 rng(11);
  std::uint64_t cookie = 0;
  auto request = [&](int f) {
    EnqueueRequest r;
    r.cookie = ++cookie;
    r.flow_id = "tenant-" + std::to_string(f);
    if (rng() % 4 != 0) r.flow_hash = registry::FlowTable::hash(r.flow_id);
    r.priority = rng() % 8 == 0 ? 5 : 0;
    r.bytes = 100;
    r.input_tokens = 1 + rng() % 500;
    return r;
  };
  for (int f = 0; f < flows; ++f) run.controller->enqueue(request(f), run.now);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::uint64_t> done;
    done.swap(run.in_flight);
    for (auto t : done) run.controller->complete(t, 7, run.now);
    // Every third event is "another kind" (null): a cancel of nothing.
    std::vector<EnqueueRequest> batch;
    for (int i = 0; i < 40; ++i) batch.push_back(request(static_cast<int>(rng() % (flows + 50))));
    auto at = [&](std::size_t j) -> const EnqueueRequest* {
      return j % 3 == 2 ? nullptr : &batch[j];
    };
    auto handle = [&](std::size_t i) {
      if (order) order->push_back(i);
      if (const EnqueueRequest* r = at(i)) run.controller->enqueue(*r, run.now);
    };
    if (prefetched) {
      run.controller->for_each_prefetched(batch.size(), at, handle);
    } else {
      for (std::size_t i = 0; i < batch.size(); ++i) handle(i);
    }
    run.controller->dispatch(run.now);
    run.now += std::chrono::milliseconds(3);
  }
  return run.decisions;
}

TEST(Prefetch, ABatchDecidesExactlyAsThePlainLoopAboveAndBelowTheThreshold) {
  for (int flows : {100, static_cast<int>(Controller::kPrefetchFlows) + 1000}) {
    std::vector<std::size_t> order;
    const auto plain = drive(flows, false, nullptr);
    const auto fetched = drive(flows, true, &order);
    EXPECT_GT(plain.size(), 20u * 20u);  // decisions were made in every round
    EXPECT_EQ(fetched, plain) << flows << " flows";
    // Each event once, in order, in every round.
    ASSERT_EQ(order.size(), 20u * 40u);
    for (std::size_t k = 0; k < order.size(); ++k) ASSERT_EQ(order[k], k % 40) << k;
  }
}

// Dispatch starts loading the fairness policy's guess of a pass's picks
// (their flows, head items and those items' neighbours): the decisions are
// those of a pass without it, above the flow count where it turns on and
// below.
TEST(Prefetch, APassDecidesTheSameWithAndWithoutTheReleaseHints) {
  for (const char* fairness :
       {"vtc-fairness-policy", "round-robin-fairness-policy", "global-strict-fairness-policy"}) {
    for (int flows : {100, static_cast<int>(Controller::kPrefetchFlows) + 1000}) {
      const auto without = drive(flows, true, nullptr, false, fairness);
      const auto with = drive(flows, true, nullptr, true, fairness);
      EXPECT_GT(without.size(), 20u * 20u);
      EXPECT_EQ(with, without) << fairness << ", " << flows << " flows";
    }
  }
}

TEST(Prefetch, ShortAndEmptyBatches) {
  Harness run(4);
  for (std::size_t n : {0u, 1u, 2u, 3u, 9u}) {
    std::vector<std::size_t> order;
    run.controller->for_each_prefetched(
        n, [](std::size_t) -> const EnqueueRequest* { return nullptr; },
        [&](std::size_t i) { order.push_back(i); });
    ASSERT_EQ(order.size(), n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(order[i], i);
  }
}

}  // namespace
}  // namespace sluice::flowcontrol
