// A new TTL regime (the pool emptied or came back, with noEndpointTtl set)
// changes queued requests' deadlines in place. In a band ordered by
// deadline (edf-ordering-policy) that can flip the order of two requests,
// and every queue and fairness policy that orders by deadline must sort
// again: a queue kept as an ordered set that still holds the old order
// misses an item when it searches for it by key, and that item, released,
// stays queued in its old flow to be released again under whichever
// request next takes its slot.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flowcontrol/controller.h"
#include "flowcontrol/saturation_detectors.h"

namespace sluice::flowcontrol {
namespace {

using namespace std::chrono_literals;

TEST(DeadlineRegime, DeadlineOrderedQueuesSortAgainWhenThePoolEmptiesAndRefills) {
  for (const char* fairness :
       {"global-strict-fairness-policy", "vtc-fairness-policy", "round-robin-fairness-policy"}) {
    SCOPED_TRACE(fairness);
    ControllerConfig cfg;
    cfg.registry.default_band.fairness = fairness;
    cfg.registry.default_band.ordering = "edf-ordering-policy";
    cfg.default_ttl = 3s;
    cfg.no_endpoint_ttl_set = true;
    cfg.no_endpoint_ttl = 10s;
    std::map<std::uint64_t, std::vector<QueueOutcome>> outcomes;  // by cookie
    std::vector<std::uint64_t> in_flight;
    Controller c(cfg,
                 std::make_unique<ConcurrencyDetector>(ConcurrencyParams{false, 1, 1000000, 0}),
                 [&](const Decision& d) {
                   outcomes[d.cookie].push_back(d.outcome);
                   if (d.outcome == QueueOutcome::kDispatched) in_flight.push_back(d.ticket);
                 });
    const std::vector<EndpointIdentity> pool = {EndpointIdentity{"127.0.0.1:1"}};
    c.set_endpoints(pool);
    auto request = [](std::uint64_t cookie, const char* flow, std::optional<Duration> ttl) {
      EnqueueRequest r;
      r.cookie = cookie;
      r.flow_id = flow;
      r.ttl = ttl;
      r.bytes = 10;
      r.input_tokens = 10;
      return r;
    };
    const TimePoint t0{};
    // The one slot is taken, so everything below stays queued until it
    // is freed.
    c.enqueue(request(100, "busy", std::nullopt), t0);
    c.dispatch(t0);
    ASSERT_EQ(in_flight.size(), 1u);
    // In flow f: B (no TTL of its own) and A (its own 5 s), a second
    // later. Under the 3 s default B's deadline is 3 s and A's 4 s.
    c.enqueue(request(1, "f", std::nullopt), t0);
    const std::uint64_t a = c.enqueue(request(2, "f", 5s), t0 + 1s);
    ASSERT_NE(a, 0u);
    // The pool empties: under the 10 s no-endpoint TTL B's deadline is
    // 10 s and A's 6 s, so A goes first now. A is cancelled meanwhile.
    c.set_endpoints({});
    c.cancel(a, t0 + 1s);
    ASSERT_EQ(outcomes[2], std::vector<QueueOutcome>{QueueOutcome::kEvictedContextCancelled});
    // C, in flow g, takes the slot A's request had.
    c.enqueue(request(3, "g", std::nullopt), t0 + 1s);
    // The pool comes back (B 3 s, C 4 s). Each request is released in
    // deadline order, once: B, C, then D, queued in f after both.
    c.set_endpoints(pool);
    auto release_next = [&](TimePoint now) {
      const std::uint64_t done = in_flight.back();
      in_flight.pop_back();
      c.complete(done, 1, now);
      c.dispatch(now);
    };
    release_next(t0 + 1s);
    release_next(t0 + 1s);
    c.enqueue(request(4, "f", std::nullopt), t0 + 1s);
    release_next(t0 + 1s);
    c.dispatch(t0 + 1s);
    const std::vector<QueueOutcome> once = {QueueOutcome::kDispatched};
    EXPECT_EQ(outcomes[100], once);
    EXPECT_EQ(outcomes[1], once);
    EXPECT_EQ(outcomes[3], once);
    EXPECT_EQ(outcomes[4], once);
    EXPECT_EQ(outcomes.size(), 5u);
  }
}

}  // namespace
}  // namespace sluice::flowcontrol
