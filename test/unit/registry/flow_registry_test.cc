#include "registry/flow_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "flowcontrol/fairness_policies.h"
#include "flowcontrol/ordering_policies.h"
#include "sluice/extensions.h"

namespace sluice::registry {
namespace {

using namespace std::chrono_literals;
const TimePoint T0 = TimePoint{} + 1s;

PolicyFactory factory() {
  return {[](const std::string& t) {
            return builtin_extensions().build<flowcontrol::OrderingPolicy>(t);
          },
          [](const std::string& t) {
            return builtin_extensions().build<flowcontrol::FairnessPolicy>(
                t, flowcontrol::FairnessParams{});
          }};
}

struct Fixture : ::testing::Test {
  RegistryConfig config() {
    RegistryConfig c;
    c.default_band.fairness = "round-robin-fairness-policy";
    c.bands.push_back({10, 0, 5, "round-robin-fairness-policy", "fcfs-ordering-policy", 0});
    return c;
  }
  FlowRegistry reg{config(), factory()};
  std::uint64_t seq = 0;

  Item* add(const std::string& id, int priority, std::uint64_t bytes = 10,
            std::optional<TimePoint> deadline = std::nullopt) {
    Item* i = reg.allocate();
    i->request.sequence = ++seq;
    i->request.byte_size = bytes;
    i->request.deadline = deadline;
    i->requested_priority = priority;
    Flow& f = reg.flow(reg.resolve(id, priority), T0);
    if (reg.would_exceed(f, bytes) != Limit::kNone) {
      reg.release(i);
      return nullptr;
    }
    reg.enqueue(i, f, T0);
    return i;
  }
  std::vector<std::uint64_t> sequences(const Flow& f) {
    std::vector<std::uint64_t> out;
    f.queue().for_each([&](Item* i) { out.push_back(i->request.sequence); });
    return out;
  }
};

TEST_F(Fixture, CountsAtEveryLevel) {
  add("a", 10, 100);
  add("a", 10, 50);
  add("b", 0, 7);
  EXPECT_EQ(reg.total_requests(), 3u);
  EXPECT_EQ(reg.total_bytes(), 157u);
  EXPECT_EQ(reg.band(10).requests(), 2u);
  EXPECT_EQ(reg.band(10).bytes(), 150u);
  EXPECT_EQ(reg.flow({"a", 10}, T0).bytes(), 150u);
  EXPECT_EQ(reg.band(10).backlogged_flows(), 1u);
  EXPECT_FALSE(reg.band(0).configured());  // made from the template
  EXPECT_TRUE(reg.band(10).configured());
}

TEST_F(Fixture, SameIdAtTwoPrioritiesIsTwoFlows) {
  add("a", 10);
  add("a", 0);
  EXPECT_EQ(reg.flow_count(), 2u);
}

TEST_F(Fixture, PinningAPriorityMovesQueuedItemsKeepingOrder) {
  add("a", 0);
  add("a", 0);
  add("a", 10);
  add("b", 0);
  reg.set_flow_override("a", FlowOverride{std::nullopt, 10, std::nullopt}, T0);
  Flow& moved = reg.flow({"a", 10}, T0);
  EXPECT_EQ(sequences(moved), (std::vector<std::uint64_t>{1, 2, 3}));
  // Policies see each moved request's new flow.
  moved.queue().for_each([&](Item* i) { EXPECT_EQ(i->request.flow, &moved.key()); });
  EXPECT_EQ(reg.flow({"a", 0}, T0).queued(), 0u);
  EXPECT_EQ(reg.band(10).requests(), 3u);  // over its limit of 5? no: 3; never dropped anyway
  EXPECT_EQ(reg.total_requests(), 4u);
  // New requests of the id follow the pin.
  EXPECT_EQ(reg.resolve("a", -5), (FlowKey{"a", 10}));
  // Clearing the override sends each request back to the priority it asked for.
  reg.clear_flow_override("a", T0);
  EXPECT_EQ(sequences(reg.flow({"a", 0}, T0)), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(sequences(reg.flow({"a", 10}, T0)), (std::vector<std::uint64_t>{3}));
}

TEST_F(Fixture, MovedItemsAreKeptEvenOverTheTargetLimit) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(add("x", 10));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(add("y", 0));
  EXPECT_EQ(add("z", 10), nullptr);  // band 10 is full (maxRequests 5)
  reg.set_flow_override("y", FlowOverride{std::nullopt, 10, std::nullopt}, T0);
  EXPECT_EQ(reg.band(10).requests(), 8u);
  EXPECT_EQ(reg.total_requests(), 8u);
}

TEST_F(Fixture, WeightAndFlowLimitOverrides) {
  reg.set_configured_weight("a", 2);
  add("a", 0);
  EXPECT_DOUBLE_EQ(reg.flow({"a", 0}, T0).weight(), 2);
  reg.set_flow_override("a", FlowOverride{5.0, std::nullopt, 2}, T0);
  EXPECT_DOUBLE_EQ(reg.flow({"a", 0}, T0).weight(), 5);
  EXPECT_TRUE(add("a", 0));
  EXPECT_EQ(add("a", 0), nullptr);  // per-flow limit 2
  reg.clear_flow_override("a", T0);
  EXPECT_DOUBLE_EQ(reg.flow({"a", 0}, T0).weight(), 2);
  EXPECT_TRUE(add("a", 0));
}

TEST_F(Fixture, ChangingABandsOrderingKeepsItsItems) {
  add("a", 10, 10, T0 + 30s);
  add("a", 10, 10, T0 + 10s);
  add("a", 10, 10, std::nullopt);
  add("a", 10, 10, T0 + 20s);
  Flow& f = reg.flow({"a", 10}, T0);
  EXPECT_EQ(f.head()->sequence, 1u);
  BandConfig b = reg.band(10).config();
  b.ordering = "edf-ordering-policy";
  reg.set_band(b, T0);
  EXPECT_EQ(sequences(f), (std::vector<std::uint64_t>{2, 4, 1, 3}));  // no TTL goes last
  EXPECT_EQ(reg.band(10).requests(), 4u);
  EXPECT_EQ(reg.band(10).fairness().pick(), &f);  // the new fairness policy knows the flow
}

TEST_F(Fixture, RemovingABandRevertsToTheTemplateAndKeepsItems) {
  add("a", 10);
  reg.remove_band(10, T0);
  EXPECT_FALSE(reg.band(10).configured());
  EXPECT_EQ(reg.band(10).requests(), 1u);
  EXPECT_EQ(reg.band(10).config().max_requests, 0u);
  // A new band is live at once.
  reg.set_band({-5, 0, 1, "round-robin-fairness-policy", "fcfs-ordering-policy", 0}, T0);
  EXPECT_TRUE(add("s", -5));
  EXPECT_EQ(add("s", -5), nullptr);
}

// A reloaded config as a whole: band 10 gone (its items stay, under the
// new default), band 20 new, global and default limits changed, weights
// re-applied to live flows while an operator's override still wins.
TEST_F(Fixture, ApplyingAReloadedConfigKeepsItemsAndRespectsOverrides) {
  reg.set_configured_weight("a", 2);
  add("a", 10);
  add("b", 0);
  add("c", 0);
  reg.set_flow_override("c", FlowOverride{7.0, std::nullopt, std::nullopt}, T0);
  RegistryConfig next;
  next.max_requests = 4;
  next.default_band.fairness = "round-robin-fairness-policy";
  next.default_band.max_requests = 3;
  next.bands.push_back({20, 0, 1, "vtc-fairness-policy", "fcfs-ordering-policy", 0.1});
  reg.apply(next, {{"b", 4.0}, {"c", 9.0}}, nullptr, T0);
  EXPECT_FALSE(reg.band(10).configured());
  EXPECT_EQ(reg.band(10).requests(), 1u);
  EXPECT_EQ(reg.band(10).config().max_requests, 3u);
  EXPECT_TRUE(reg.band(20).configured());
  EXPECT_EQ(reg.band(20).config().fairness, "vtc-fairness-policy");
  EXPECT_DOUBLE_EQ(reg.flow({"a", 10}, T0).weight(), 1);  // no longer configured
  EXPECT_DOUBLE_EQ(reg.flow({"b", 0}, T0).weight(), 4);
  EXPECT_DOUBLE_EQ(reg.flow({"c", 0}, T0).weight(), 7);  // the override wins
  EXPECT_EQ(reg.total_requests(), 3u);
  EXPECT_TRUE(add("d", 20));
  EXPECT_EQ(add("e", 20), nullptr);  // band 20's limit: 1
  EXPECT_EQ(add("f", 0), nullptr);   // global limit: 4
  // New prices rebuild every band's fairness policy; the backlog is kept.
  auto f = factory();
  reg.apply(next, {}, &f, T0);
  EXPECT_NE(reg.band(0).fairness().pick(), nullptr);
  EXPECT_EQ(reg.total_requests(), 4u);
}

TEST_F(Fixture, TicketsGoStaleWhenASlotIsReused) {
  Item* i = reg.allocate();
  auto ticket = FlowRegistry::ticket(i);
  i->state = Item::State::kQueued;
  EXPECT_EQ(reg.find(ticket), i);
  reg.release(i);
  EXPECT_EQ(reg.find(ticket), nullptr);
  Item* again = reg.allocate();
  again->state = Item::State::kQueued;
  EXPECT_EQ(again, i);
  EXPECT_NE(FlowRegistry::ticket(again), ticket);
  EXPECT_EQ(reg.find(ticket), nullptr);
  EXPECT_EQ(reg.find(0), nullptr);
  EXPECT_EQ(reg.find(1ull << 40), nullptr);
}

// The item pool grows a huge page of items at a time: every item of three
// chunks is distinct, found by its ticket, and no other ticket finds it.
TEST_F(Fixture, ItemsOfEveryChunkAreFoundByTheirTickets) {
  std::vector<Item*> items;
  std::set<Item*> distinct;
  std::vector<std::uint64_t> tickets;
  const std::size_t n = 3 * (kHugePageBytes / sizeof(Item)) + 5;
  for (std::size_t k = 0; k < n; ++k) {
    Item* i = reg.allocate();
    i->state = Item::State::kQueued;
    items.push_back(i);
    distinct.insert(i);
    tickets.push_back(FlowRegistry::ticket(i));
  }
  ASSERT_EQ(distinct.size(), n);
  for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(reg.find(tickets[k]), items[k]) << k;
  for (std::size_t k = 0; k < n; k += 2) reg.release(items[k]);
  for (std::size_t k = 0; k < n; ++k)
    ASSERT_EQ(reg.find(tickets[k]), k % 2 ? items[k] : nullptr) << k;
}

TEST_F(Fixture, IdleFlowsAreCollected) {
  Item* i = add("a", 0);
  reg.dequeue(i, T0);
  reg.release(i);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 1min, std::chrono::minutes(5)), 0u);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 6min, std::chrono::minutes(5)), 1u);
  EXPECT_EQ(reg.flow_count(), 0u);
}

}  // namespace
}  // namespace sluice::registry

namespace sluice::registry {
namespace {

FlowRegistry capped_registry(std::uint64_t max_flows) {
  RegistryConfig c;
  c.default_band.fairness = "round-robin-fairness-policy";
  c.max_flows = max_flows;
  return FlowRegistry(c, factory());
}

// Idle flows are collected oldest first, at a cost of the flows collected:
// those with queued or in-flight work stay whatever their age.
TEST(FlowRegistryIdle, CollectsOnlyFlowsIdleLongEnoughOldestFirst) {
  FlowRegistry reg = capped_registry(0);
  reg.flow({"old", 0}, T0);
  reg.flow({"newer", 0}, T0 + 10s);
  Item* busy = reg.allocate();
  busy->request.sequence = 1;
  reg.enqueue(busy, reg.flow({"busy", 0}, T0), T0);
  EXPECT_EQ(reg.flow_count(), 3u);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 30s, 25s), 1u);  // "old" only
  EXPECT_EQ(reg.flow_count(), 2u);
  EXPECT_EQ(reg.band(0).flows().count("old"), 0u);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 100s, 25s), 1u);  // "newer"; "busy" has work
  EXPECT_EQ(reg.band(0).flows().count("busy"), 1u);
  // In flight counts as work too; finishing makes it idle from then.
  reg.dequeue(busy, T0 + 100s);
  reg.mark_in_flight(busy, 0);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 200s, 25s), 0u);
  reg.finish_in_flight(busy, T0 + 200s);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 210s, 25s), 0u);
  EXPECT_EQ(reg.collect_idle_flows(T0 + 226s, 25s), 1u);
  EXPECT_EQ(reg.flow_count(), 0u);
}

// At max_flows a newcomer takes the place of the longest idle flow; when
// every flow has work it is refused and the others keep their state.
TEST(FlowRegistryIdle, FlowCapReplacesTheLongestIdleOrRefuses) {
  FlowRegistry reg = capped_registry(2);
  Item* a = reg.allocate();
  a->request.sequence = 1;
  reg.enqueue(a, *reg.admit_flow({"a", 0}, T0), T0);
  ASSERT_NE(reg.admit_flow({"b", 0}, T0 + 1s), nullptr);  // idle (nothing queued)
  ASSERT_NE(reg.admit_flow({"c", 0}, T0 + 2s), nullptr);  // replaces idle "b"
  EXPECT_EQ(reg.band(0).flows().count("b"), 0u);
  EXPECT_EQ(reg.flow_count(), 2u);
  Item* c = reg.allocate();
  c->request.sequence = 2;
  reg.enqueue(c, *reg.admit_flow({"c", 0}, T0 + 2s), T0 + 2s);
  EXPECT_EQ(reg.admit_flow({"d", 0}, T0 + 3s), nullptr);  // a and c have work
  EXPECT_EQ(reg.flow_limit_rejections(), 1u);
  EXPECT_NE(reg.admit_flow({"a", 0}, T0 + 3s), nullptr);  // an existing flow is always found
  EXPECT_EQ(reg.flow({"a", 0}, T0).queued(), 1u);
  EXPECT_EQ(reg.flow_count(), 2u);
}

// The chunked copy: every flow that lives through the whole copy is in it
// exactly once, whatever is made or dropped between chunks (drops swap the
// last flow into the dropped one's place, before and after the cursor).
TEST(FlowRegistryCopy, EveryFlowLivingThroughTheCopyIsInItExactlyOnce) {
  for (std::size_t chunk : {1u, 7u, 64u}) {
    SCOPED_TRACE(chunk);
    FlowRegistry reg = capped_registry(0);
    // Made out of order of their idle time, so that collection (oldest idle
    // first) drops flows all over the list.
    for (int i = 0; i < 300; ++i) {
      const int age = (i * 37) % 300;
      reg.flow({"f" + std::to_string(i), 0}, T0 + std::chrono::seconds(age));
    }
    std::set<std::string> made;
    reg.begin_flow_copy();
    std::vector<FlowSummary> out;
    int steps = 0;
    while (!reg.continue_flow_copy(chunk, out)) {
      ++steps;
      // Between chunks: the two oldest idle flows go (100 in all), a new
      // one comes.
      if (steps <= 50) reg.collect_idle_flows(T0 + std::chrono::seconds(2 * steps), 1s);
      const std::string fresh = "new" + std::to_string(steps);
      reg.flow({fresh, 0}, T0 + 10000s);
      made.insert(fresh);
    }
    std::map<std::string, int> seen;
    for (const auto& s : out) seen[s.id] += 1;
    for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
    int survivors = 0;
    for (const Flow* f : reg.band(0).flows()) {
      const std::string& id = f->key().id;
      if (made.count(id)) continue;
      ++survivors;
      EXPECT_EQ(seen.count(id), 1u) << id;
    }
    EXPECT_GT(survivors, 0);
    EXPECT_GT(steps, 2);
  }
}

}  // namespace
}  // namespace sluice::registry

namespace sluice::registry {
namespace {

// llm-d's defaultNegativePriorityBand: bands below zero made on the fly
// take it, the others the default band; a reload that drops it reverts.
TEST(FlowRegistryTemplates, NegativeBandsUseTheirOwnTemplate) {
  RegistryConfig c;
  c.default_band.fairness = "round-robin-fairness-policy";
  c.default_band.max_requests = 100;
  BandConfig negative;
  negative.fairness = "global-strict-fairness-policy";
  negative.max_requests = 7;
  c.default_negative_band = negative;
  FlowRegistry reg(c, factory());
  EXPECT_EQ(reg.band(-5).config().max_requests, 7u);
  EXPECT_EQ(reg.band(-5).config().fairness, "global-strict-fairness-policy");
  EXPECT_EQ(reg.band(-5).config().priority, -5);
  EXPECT_EQ(reg.band(0).config().max_requests, 100u);
  EXPECT_EQ(reg.band(3).config().fairness, "round-robin-fairness-policy");
  c.default_negative_band.reset();
  reg.apply(c, {}, nullptr, T0);
  EXPECT_EQ(reg.band(-9).config().max_requests, 100u);
}

// FlowTable against std::unordered_map under random churn. Hashes are
// chosen by the test: half collide on their low bits at the end of the
// table (probe runs wrap around), so backward-shift deletion is exercised
// across the wrap and inside long runs.
TEST(FlowTableTest, MatchesAMapUnderChurnWithCollidingHashes) {
  auto fcfs = builtin_extensions().build<flowcontrol::OrderingPolicy>("fcfs-ordering-policy");
  FlowTable table;
  std::unordered_map<std::string, std::uint64_t> oracle;  // id -> hash
  std::mt19937_64 rng(7);
  auto hash_for = [&](int id) {
    const std::uint64_t high = static_cast<std::uint64_t>(id) << 32;
    return id % 2 ? high | 0xfffff : high | (rng() & 0xff);  // 0xfffff: the last slot
  };
  std::uint32_t slot = 0;
  for (int step = 0; step < 20000; ++step) {
    const int id = static_cast<int>(rng() % 600);
    const std::string name = "f" + std::to_string(id);
    auto it = oracle.find(name);
    if (rng() % 3 != 0) {
      if (it == oracle.end()) {
        const std::uint64_t h = hash_for(id);
        Flow& f = table.insert(
            std::make_unique<Flow>(FlowKey{name, 0}, 1.0, slot++, nullptr, fcfs.get()), h);
        EXPECT_EQ(f.key().id, name);
        oracle[name] = h;
      }
    } else if (it != oracle.end()) {
      EXPECT_TRUE(table.erase(name, it->second));
      oracle.erase(it);
    } else {
      EXPECT_FALSE(table.erase(name, hash_for(id)));
    }
    if (step % 500 == 0 || step == 19999) {
      ASSERT_EQ(table.size(), oracle.size());
      for (const auto& [n, h] : oracle) {
        const Flow* f = table.find(n, h);
        ASSERT_NE(f, nullptr) << n;
        EXPECT_EQ(f->key().id, n);
      }
      // The prefetch guess (no id compared, one cache line looked at) is
      // the flow of the hash or nothing, even in these long probe runs.
      for (const auto& [n, h] : oracle) {
        const Flow* g = table.guess(h);
        if (g) {
          EXPECT_EQ(g, table.find(n, h)) << n;
        }
      }
      EXPECT_EQ(table.guess(0x12345), nullptr);  // high bits no id has
      std::size_t seen = 0;
      for (const Flow* f : table) seen += oracle.count(f->key().id);
      EXPECT_EQ(seen, oracle.size());
    }
  }
  // With the real hash the guess is nearly always the flow (a table at
  // most half full: a run rarely leaves its first slot's line).
  FlowTable spread;
  std::size_t guessed = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "tenant-" + std::to_string(i);
    spread.insert(std::make_unique<Flow>(FlowKey{name, 0}, 1.0, slot++, nullptr, fcfs.get()),
                  FlowTable::hash(name));
  }
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "tenant-" + std::to_string(i);
    const Flow* g = spread.guess(FlowTable::hash(name));
    if (g) {
      EXPECT_EQ(g, spread.find(name));
    }
    guessed += g != nullptr;
  }
  EXPECT_GE(guessed, 2700u);
  // The default hash: found by id alone.
  table.insert(std::make_unique<Flow>(FlowKey{"tenant-a", 0}, 1.0, slot++, nullptr, fcfs.get()),
               FlowTable::hash("tenant-a"));
  ASSERT_NE(table.find("tenant-a"), nullptr);
  EXPECT_EQ(table.find("tenant-b"), nullptr);
}

// A flow as the fairness policies see it, for their oracle tests.
struct FakeFlow final : flowcontrol::FlowView {
  FlowKey k;
  double w = 1;
  std::uint32_t s = 0;
  flowcontrol::QueuedRequest h;
  const FlowKey& key() const override { return k; }
  double weight() const override { return w; }
  std::size_t queued() const override { return 1; }
  const flowcontrol::QueuedRequest* head() const override { return &h; }
  std::uint32_t slot() const override { return s; }
};

// A policy's guess of its next picks, asked for `k` of them for each k in
// `ks`, is the first min(k, 32) slots of `expected`.
void ExpectUpcoming(flowcontrol::FairnessPolicy& policy, const std::vector<int>& expected,
                    std::initializer_list<std::size_t> ks, int step) {
  for (std::size_t k : ks) {
    flowcontrol::FlowView* out[64];
    const std::size_t n = policy.upcoming(out, std::min<std::size_t>(k, std::size(out)));
    ASSERT_EQ(n, std::min({k, std::size_t{32}, expected.size()})) << "step " << step;
    for (std::size_t r = 0; r < n; ++r)
      ASSERT_EQ(static_cast<int>(out[r]->slot()), expected[r]) << "step " << step << " rank " << r;
  }
}

// vtc-fairness-policy's heap against a brute-force oracle: after every
// random event (backlogged, idle, dispatched, output tokens, removed), the
// flow picked is the backlogged one with the smallest (counter, last
// served, slot), and every counter matches the oracle's.
TEST(VtcHeapTest, PicksTheSmallestCounterLikeABruteForceScan) {
  struct Model {
    double counter = 0;
    std::uint64_t last_served = 0;
    bool active = false;
  };
  constexpr int kFlows = 300;
  std::vector<FakeFlow> flows(kFlows);
  std::vector<Model> model(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    flows[i].k = FlowKey{"f" + std::to_string(i), 0};
    flows[i].s = static_cast<std::uint32_t>(i);
    flows[i].w = 1 + i % 4;
  }
  flowcontrol::VtcFairness vtc(1.0, 2.0);
  std::uint64_t served = 0;
  double last_counter = 0;
  std::mt19937 rng(11);
  for (int step = 0; step < 30000; ++step) {
    const int i = static_cast<int>(rng() % kFlows);
    auto& m = model[i];
    switch (rng() % 5) {
      case 0: {  // backlogged
        if (!m.active) {
          double floor = last_counter;
          bool any = false;
          for (const auto& o : model)
            if (o.active) floor = any ? std::min(floor, o.counter) : o.counter, any = true;
          m.counter = std::max(m.counter, floor);
          m.active = true;
        }
        vtc.on_backlogged(flows[i]);
        break;
      }
      case 1:  // idle
        m.active = false;
        vtc.on_idle(flows[i]);
        break;
      case 2: {  // dispatched (tokens 1..64)
        flowcontrol::QueuedRequest q;
        q.input_tokens = 1 + rng() % 64;
        m.last_served = ++served;
        m.counter += 1.0 * static_cast<double>(q.input_tokens) / flows[i].w;
        last_counter = m.counter;
        vtc.on_dispatched(flows[i], q);
        break;
      }
      case 3: {  // output tokens
        const std::uint64_t t = rng() % 32;
        m.counter += 2.0 * static_cast<double>(t) / flows[i].w;
        vtc.on_output_tokens(flows[i], t);
        break;
      }
      case 4:  // removed (collected)
        if (rng() % 8 == 0) {
          m = Model{};
          vtc.on_removed(flows[i]);
        }
        break;
    }
    int best = -1;
    for (int j = 0; j < kFlows; ++j) {
      if (!model[j].active) continue;
      if (best < 0 || std::tie(model[j].counter, model[j].last_served, j) <
                          std::tie(model[best].counter, model[best].last_served, best))
        best = j;
    }
    flowcontrol::FlowView* picked = vtc.pick();
    ASSERT_EQ(picked ? static_cast<int>(picked->slot()) : -1, best) << "step " << step;
    // The guess of the picks to come (for prefetching): the smallest
    // backlogged flows in order, as many as asked for up to 32.
    if (step % 97 == 0) {
      std::vector<int> order;
      for (int j = 0; j < kFlows; ++j)
        if (model[j].active) order.push_back(j);
      std::sort(order.begin(), order.end(), [&](int a, int b) {
        return std::tie(model[a].counter, model[a].last_served, a) <
               std::tie(model[b].counter, model[b].last_served, b);
      });
      ASSERT_NO_FATAL_FAILURE(ExpectUpcoming(vtc, order, {0, 1, 5, 32, 40}, step));
    }
    ASSERT_DOUBLE_EQ(vtc.counter(flows[i]), m.counter) << "step " << step;
  }
}

// vtc's heap compares counters as integers (one 128-bit comparison, no
// branch): the mapping keeps the doubles' order and equality, and inverts.
TEST(VtcHeapTest, CounterBitsKeepTheOrderOfDoubles) {
  using V = flowcontrol::VtcFairness;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {-inf,
                                      -1e300,
                                      -2.5,
                                      -1,
                                      -std::numeric_limits<double>::min(),
                                      -std::numeric_limits<double>::denorm_min(),
                                      -0.0,
                                      0.0,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::min(),
                                      1e-9,
                                      1,
                                      1.0000000000000002,
                                      2.5,
                                      400,
                                      1e15,
                                      1e300,
                                      inf};
  for (double a : values) {
    EXPECT_EQ(V::from_order_bits(V::order_bits(a)), a) << a;
    for (double b : values) {
      EXPECT_EQ(V::order_bits(a) < V::order_bits(b), a < b) << a << " " << b;
      EXPECT_EQ(V::order_bits(a) == V::order_bits(b), a == b) << a << " " << b;
    }
  }
  EXPECT_FALSE(std::signbit(V::from_order_bits(V::order_bits(-0.0))));
  // A NaN of either sign goes after +inf (a negative NaN's bits would
  // otherwise sort before every counter and starve the band).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_GT(V::order_bits(nan), V::order_bits(inf));
  EXPECT_GT(V::order_bits(-nan), V::order_bits(inf));
}

// global-strict-fairness-policy against a brute-force scan of the
// backlogged flows' heads, by each built-in ordering (a heap of copied
// order keys) and by an ordering without a key (the set): after every
// random event (backlogged, idle, head changed, ordering switched) the
// flow picked has the best head.
TEST(GlobalStrictTest, PicksTheBestHeadLikeABruteForceScan) {
  // Deadline order, without an order key: the set.
  struct Keyless final : flowcontrol::OrderingPolicy {
    std::string_view type() const override { return "keyless"; }
    bool before(const flowcontrol::QueuedRequest& a,
                const flowcontrol::QueuedRequest& b) const override {
      return a.deadline.value_or(TimePoint::max()) < b.deadline.value_or(TimePoint::max());
    }
  };
  flowcontrol::FcfsOrdering fcfs;
  flowcontrol::EdfOrdering edf;
  Keyless keyless;
  const flowcontrol::OrderingPolicy* orderings[] = {&fcfs, &edf, &keyless};
  constexpr int kFlows = 150;
  std::vector<FakeFlow> flows(kFlows);
  std::vector<bool> active(kFlows, false);
  std::mt19937 rng(3);
  std::uint64_t sequence = 0;
  auto new_head = [&](FakeFlow& f) {
    f.h = flowcontrol::QueuedRequest{};
    f.h.sequence = ++sequence;
    // Few distinct deadlines, so that ties (broken by arrival) are common.
    if (rng() % 4 != 0) f.h.deadline = TimePoint{} + std::chrono::seconds(rng() % 20);
  };
  for (int i = 0; i < kFlows; ++i) {
    flows[i].k = FlowKey{"f" + std::to_string(i), 0};
    flows[i].s = static_cast<std::uint32_t>(i);
    new_head(flows[i]);
  }
  flowcontrol::GlobalStrictFairness gs;
  const flowcontrol::OrderingPolicy* ordering = orderings[0];
  gs.set_ordering(ordering);
  auto better = [&](int a, int b) {
    const auto& ha = flows[a].h;
    const auto& hb = flows[b].h;
    if (ordering->before(ha, hb)) return true;
    if (ordering->before(hb, ha)) return false;
    return ha.sequence < hb.sequence;
  };
  for (int step = 0; step < 30000; ++step) {
    const int i = static_cast<int>(rng() % kFlows);
    switch (rng() % 9) {
      case 0:
      case 1:
        active[i] = true;
        gs.on_backlogged(flows[i]);
        break;
      case 2:
        active[i] = false;
        gs.on_idle(flows[i]);
        new_head(flows[i]);  // whatever it holds next time
        break;
      case 3:
      case 4:
      case 5:
        if (active[i]) {
          new_head(flows[i]);
          gs.on_head_changed(flows[i]);
        }
        break;
      case 6:  // the best is served: its next head
        if (flowcontrol::FlowView* p = gs.pick()) {
          new_head(flows[p->slot()]);
          gs.on_head_changed(flows[p->slot()]);
        }
        break;
      case 7:
        if (rng() % 50 == 0) {
          ordering = orderings[rng() % 3];
          gs.set_ordering(ordering);
        }
        break;
      case 8:
        break;
    }
    std::vector<int> order;
    for (int j = 0; j < kFlows; ++j)
      if (active[j]) order.push_back(j);
    std::sort(order.begin(), order.end(), better);
    flowcontrol::FlowView* picked = gs.pick();
    ASSERT_EQ(picked ? static_cast<int>(picked->slot()) : -1, order.empty() ? -1 : order.front())
        << "step " << step << " ordering " << ordering->type();
  }
}

// round-robin-fairness-policy's ring against a plain list: after every
// random event (backlogged, idle, dispatched, removed) the flow picked is
// the list's front, and the guess of the picks to come is the list from
// its front.
TEST(RoundRobinRingTest, TakesTurnsLikeAListAndGuessesItsFront) {
  constexpr int kFlows = 200;
  std::vector<FakeFlow> flows(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    flows[i].k = FlowKey{"f" + std::to_string(i), 0};
    flows[i].s = static_cast<std::uint32_t>(i);
  }
  flowcontrol::RoundRobinFairness rr;
  std::vector<int> model;  // the ring, front first
  auto in_model = [&](int i) { return std::find(model.begin(), model.end(), i) != model.end(); };
  std::mt19937 rng(5);
  for (int step = 0; step < 20000; ++step) {
    const int i = static_cast<int>(rng() % kFlows);
    switch (rng() % 4) {
      case 0:
        if (!in_model(i)) model.push_back(i);
        rr.on_backlogged(flows[i]);
        break;
      case 1:
        model.erase(std::remove(model.begin(), model.end(), i), model.end());
        rr.on_idle(flows[i]);
        break;
      case 2: {  // the front is served (or, at times, another flow)
        const int served = !model.empty() && rng() % 4 != 0 ? model.front() : i;
        if (in_model(served)) {
          model.erase(std::find(model.begin(), model.end(), served));
          model.push_back(served);
        }
        rr.on_dispatched(flows[served], flowcontrol::QueuedRequest{});
        break;
      }
      case 3:
        if (!in_model(i)) rr.on_removed(flows[i]);
        break;
    }
    flowcontrol::FlowView* picked = rr.pick();
    ASSERT_EQ(picked ? static_cast<int>(picked->slot()) : -1, model.empty() ? -1 : model.front())
        << "step " << step;
    if (step % 89 == 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectUpcoming(rr, model, {0, 1, 7, 32, 50}, step));
    }
  }
}

}  // namespace
}  // namespace sluice::registry

namespace sluice::registry {
namespace {

// Large vectors live in 2 MB-aligned mappings (outside ASan), zero-filled,
// given back when the vector goes; small ones use the ordinary allocator.
TEST(HugePages, LargeVectorsAreHugePageMappingsGivenBack) {
  const std::size_t before = huge_bytes_mapped().load();
  {
    HugeVector<std::uint64_t> small(1000);
    EXPECT_EQ(huge_bytes_mapped().load(), before);
    HugeVector<std::uint64_t> large(3 * kHugePageBytes / sizeof(std::uint64_t) + 1);
    for (std::uint64_t v : large) ASSERT_EQ(v, 0u);
    for (std::size_t i = 0; i < large.size(); ++i) large[i] = i;
    large.resize(large.size() * 2);  // moves to a larger mapping, keeping values
    for (std::size_t i = 0; i < large.size() / 2; ++i) ASSERT_EQ(large[i], i);
    if constexpr (kHugePages) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % kHugePageBytes, 0u);
      EXPECT_EQ(huge_bytes_mapped().load() - before, huge_round(large.capacity() * 8));
    } else {
      EXPECT_EQ(huge_bytes_mapped().load(), before);
    }
  }
  EXPECT_EQ(huge_bytes_mapped().load(), before);
}

// A slot pool hands out distinct, aligned slots across several huge pages
// and reuses freed ones before mapping more.
TEST(HugePages, SlotPoolReusesFreedSlots) {
  using Pool = SlotPool<96, 32>;
  Pool& pool = Pool::instance();
  const std::size_t n = 3 * kHugePageBytes / 96;
  std::vector<void*> slots;
  std::set<void*> distinct;
  for (std::size_t i = 0; i < n; ++i) {
    void* p = pool.allocate();
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 32, 0u);
    std::memset(p, 0xab, 96);  // the whole slot is ours (ASan checks it too)
    slots.push_back(p);
    distinct.insert(p);
  }
  EXPECT_EQ(distinct.size(), n);
  const std::size_t mapped = pool.mapped_bytes();
  if constexpr (kHugePages) {
    EXPECT_EQ(pool.in_use_bytes(), n * 96);
    EXPECT_GE(mapped, n * 96);
  }
  for (void* p : slots) pool.deallocate(p);
  EXPECT_EQ(pool.in_use_bytes(), 0u);
  for (std::size_t i = 0; i < n; ++i) slots[i] = pool.allocate();
  EXPECT_EQ(pool.mapped_bytes(), mapped);  // all reused, nothing new mapped
  if constexpr (kHugePages) {
    // Lowest first: after churn the live slots stay at the front of the
    // pool. Slots come out in address order within a block, blocks in the
    // order they were mapped; a freed slot is the next one handed out when
    // it is the lowest free one.
    for (std::size_t i = 1; i < n; ++i) {
      const auto a = reinterpret_cast<std::uintptr_t>(slots[i - 1]);
      const auto b = reinterpret_cast<std::uintptr_t>(slots[i]);
      if (a / kHugePageBytes == b / kHugePageBytes) {
        ASSERT_LT(a, b) << i;
      }
    }
    pool.deallocate(slots[n / 2]);
    pool.deallocate(slots[10]);
    void* first = pool.allocate();
    void* second = pool.allocate();
    EXPECT_EQ(first, slots[10]);
    EXPECT_EQ(second, slots[n / 2]);
    slots[10] = first;  // whatever came back is what is freed below
    slots[n / 2] = second;
  }
  for (void* p : slots) pool.deallocate(p);
}

}  // namespace
}  // namespace sluice::registry
