#include "scheduling/least_in_flight.h"

#include <gtest/gtest.h>

namespace sluice::scheduling {
namespace {

datalayer::EndpointSet make(int n) {
  std::vector<config::EndpointConfig> cfg(n);
  for (int i = 0; i < n; ++i) cfg[i].address = "10.0.0.1:" + std::to_string(8000 + i);
  return datalayer::EndpointSet(cfg);
}

TEST(LeastInFlight, PicksFewestAndRotatesTies) {
  auto eps = make(3);
  std::uint32_t rot = 0;
  auto now = datalayer::Clock::now();
  std::vector<bool> none(3, false);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 300; ++i) counts[pick_least_in_flight(eps, none, now, rot)]++;
  EXPECT_EQ(counts[0], 100);
  EXPECT_EQ(counts[1], 100);
  EXPECT_EQ(counts[2], 100);
  datalayer::InFlightPermit p0(&eps.at(0)), p2(&eps.at(2));
  EXPECT_EQ(pick_least_in_flight(eps, none, now, rot), 1);
}

TEST(LeastInFlight, SkipsDownAndExcluded) {
  auto eps = make(3);
  std::uint32_t rot = 0;
  auto now = datalayer::Clock::now();
  eps.at(1).mark_down(now, std::chrono::seconds(1));
  std::vector<bool> excluded = {true, false, false};
  EXPECT_EQ(pick_least_in_flight(eps, excluded, now, rot), 2);
  excluded[2] = true;
  EXPECT_EQ(pick_least_in_flight(eps, excluded, now, rot), -1);
  // After the backoff, the endpoint is usable again.
  EXPECT_EQ(pick_least_in_flight(eps, excluded, now + std::chrono::seconds(2), rot), 1);
}

TEST(InFlightPermit, ReleasesOnceOnDestructionOrMove) {
  auto eps = make(1);
  {
    datalayer::InFlightPermit a(&eps.at(0));
    EXPECT_EQ(eps.at(0).in_flight.load(), 1);
    datalayer::InFlightPermit b = std::move(a);
    EXPECT_EQ(eps.at(0).in_flight.load(), 1);
    b.release();
    b.release();
    EXPECT_EQ(eps.at(0).in_flight.load(), 0);
    datalayer::InFlightPermit c(&eps.at(0));
  }
  EXPECT_EQ(eps.at(0).in_flight.load(), 0);
}

TEST(LeastInFlight, EmptyPool) {
  auto eps = make(0);
  std::uint32_t rot = 0;
  EXPECT_EQ(pick_least_in_flight(eps, {}, datalayer::Clock::now(), rot), -1);
}

}  // namespace
}  // namespace sluice::scheduling
