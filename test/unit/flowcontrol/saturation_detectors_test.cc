// The dispatcher asks a detector for the room of the whole pool at once
// (has_room_each); it must say for every endpoint what has_room says of it,
// the concurrency detector's own loop as much as the default one.
#include "flowcontrol/saturation_detectors.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sluice::flowcontrol {
namespace {

std::vector<EndpointLoad> random_pool(std::mt19937_64& rng, TimePoint now) {
  std::vector<EndpointLoad> pool(1 + rng() % 300);
  for (auto& e : pool) {
    e.has_metrics = rng() % 5 != 0;
    e.metrics_time = now - std::chrono::milliseconds(rng() % 400);
    e.waiting = static_cast<double>(rng() % 12);
    e.kv_cache_usage = static_cast<double>(rng() % 1000) / 1000.0;
    e.in_flight = static_cast<std::uint32_t>(rng() % 12);
    e.dispatched_since_scrape = static_cast<std::uint32_t>(rng() % 4);
    e.in_flight_tokens = rng() % 5000;
  }
  return pool;
}

void expect_each_matches_one_by_one(const SaturationDetector& d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const TimePoint now = TimePoint{} + std::chrono::hours(1);
  for (int round = 0; round < 200; ++round) {
    const auto pool = random_pool(rng, now);
    std::vector<std::uint8_t> room(pool.size(), 7);
    d.has_room_each(pool, now, room);
    for (std::size_t i = 0; i < pool.size(); ++i)
      ASSERT_EQ(room[i], d.has_room(pool[i], now) ? 1 : 0)
          << d.type() << " round " << round << " endpoint " << i;
  }
}

TEST(SaturationDetectors, RoomOfThePoolIsTheRoomOfEachEndpoint) {
  expect_each_matches_one_by_one(ConcurrencyDetector(ConcurrencyParams{false, 6, 0, 0}), 1);
  expect_each_matches_one_by_one(ConcurrencyDetector(ConcurrencyParams{false, 6, 0, 0.5}), 2);
  expect_each_matches_one_by_one(ConcurrencyDetector(ConcurrencyParams{true, 0, 2500, 0}), 3);
  expect_each_matches_one_by_one(ConcurrencyDetector(ConcurrencyParams{true, 0, 2500, 0.2}), 4);
  expect_each_matches_one_by_one(UtilizationDetector(UtilizationParams{}), 5);
}

}  // namespace
}  // namespace sluice::flowcontrol
