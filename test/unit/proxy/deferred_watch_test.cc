#include "proxy/deferred_watch.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sluice::proxy {
namespace {

struct Item : DeferredWatches::Hook {
  explicit Item(int i = 0) : id(i) {}
  int id;
};

std::vector<int> advance(DeferredWatches& w) {
  std::vector<int> armed;
  w.advance([&](DeferredWatches::Hook& h) { armed.push_back(static_cast<Item&>(h).id); });
  return armed;
}

// A hook is armed at the second tick after it enrolled: open for at least
// one whole tick, and at most two.
TEST(DeferredWatches, ArmsAHookAtTheSecondTickAfterItEnrolled) {
  DeferredWatches w;
  Item a(1), b(2), c(3);
  EXPECT_TRUE(w.enroll(a));
  EXPECT_FALSE(w.enroll(b));
  EXPECT_TRUE(a.enrolled());
  EXPECT_TRUE(advance(w).empty());  // the tick a and b enrolled in ends
  w.enroll(c);
  EXPECT_EQ(advance(w), (std::vector<int>{1, 2}));
  EXPECT_FALSE(a.enrolled());
  EXPECT_FALSE(b.enrolled());
  EXPECT_TRUE(c.enrolled());
  EXPECT_EQ(advance(w), (std::vector<int>{3}));
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(advance(w).empty());
}

// A request that ends before its tick is removed and never armed; removing
// what is not enrolled (or twice) changes nothing.
TEST(DeferredWatches, RemovedHooksAreNeverArmed) {
  DeferredWatches w;
  Item a(1), b(2), c(3);
  w.enroll(a);
  w.enroll(b);
  w.enroll(c);
  w.remove(b);
  w.remove(b);
  EXPECT_FALSE(b.enrolled());
  advance(w);
  EXPECT_EQ(advance(w), (std::vector<int>{1, 3}));
  w.remove(a);  // already armed and removed
  EXPECT_TRUE(w.empty());
  Item stranger;
  DeferredWatches other;
  other.enroll(stranger);
  w.remove(stranger);  // enrolled elsewhere: untouched
  EXPECT_TRUE(stranger.enrolled());
  other.remove(stranger);
}

// Enrolling again (the next request on a kept-alive connection) starts the
// hook's wait afresh; an arm callback may enroll the hook it was handed.
TEST(DeferredWatches, EnrollingAgainRestartsTheWaitAndArmMayReenroll) {
  DeferredWatches w;
  Item a(1);
  w.enroll(a);
  advance(w);
  w.enroll(a);  // moved to the current tick
  EXPECT_TRUE(advance(w).empty());
  int calls = 0;
  w.advance([&](DeferredWatches::Hook& h) {
    ++calls;
    w.enroll(h);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(a.enrolled());
  EXPECT_TRUE(advance(w).empty());
  EXPECT_EQ(advance(w), (std::vector<int>{1}));
}

// Against a model: random enrolls, removals and ticks over 64 hooks; each
// tick arms exactly the enrolled hooks whose enrollment tick is two or more
// behind, in enrollment order.
TEST(DeferredWatches, MatchesAModelUnderRandomOperations) {
  std::mt19937 rng(7);
  std::vector<Item> items(64);  // outlive the list: each is removed first
  DeferredWatches w;
  for (int i = 0; i < 64; ++i) items[i].id = i;
  struct Entry {
    int id;
    std::uint64_t tick;
  };
  std::vector<Entry> model;  // enrollment order
  std::uint64_t tick = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    const int id = static_cast<int>(rng() % 64);
    if (op < 5) {
      std::erase_if(model, [&](const Entry& e) { return e.id == id; });
      model.push_back({id, tick});
      w.enroll(items[id]);
    } else if (op < 8) {
      std::erase_if(model, [&](const Entry& e) { return e.id == id; });
      w.remove(items[id]);
    } else {
      ++tick;
      std::vector<int> expected;
      while (!model.empty() && model.front().tick + 2 <= tick) {
        expected.push_back(model.front().id);
        model.erase(model.begin());
      }
      ASSERT_EQ(advance(w), expected) << "step " << step;
    }
    for (int i = 0; i < 64; ++i) {
      const bool in_model =
          std::any_of(model.begin(), model.end(), [&](const Entry& e) { return e.id == i; });
      ASSERT_EQ(items[i].enrolled(), in_model) << "step " << step << " item " << i;
    }
    ASSERT_EQ(w.empty(), model.empty());
  }
  for (auto& item : items) w.remove(item);
  EXPECT_TRUE(w.empty());
}

}  // namespace
}  // namespace sluice::proxy
