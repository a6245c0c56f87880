// The I/O thread's pool of idle upstream connections: bounded per endpoint,
// and swept of connections idle too long or to endpoints that left.
#include "server/upstream_pool.h"

#include <gtest/gtest.h>

namespace sluice::server {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

TEST(UpstreamPool, SweepClosesTheLongIdleAndThoseOfEndpointsThatLeft) {
  boost::asio::io_context ioc;
  UpstreamPool pool(3, 4);
  const TimePoint t0{};
  auto conn = [&](std::size_t e) {
    return std::make_unique<UpstreamConnection>(ioc.get_executor(), e);
  };
  pool.give_back(conn(0), t0);
  pool.give_back(conn(0), t0 + 30s);
  pool.give_back(conn(0), t0 + 50s);
  pool.give_back(conn(1), t0 + 55s);
  pool.give_back(conn(2), t0);
  for (int i = 0; i < 5; ++i) pool.give_back(conn(2), t0 + 59s);  // 4 at most are kept
  EXPECT_EQ(pool.idle_count(2), 4u);
  auto none_gone = [](std::size_t) { return false; };
  // At 60 s with a 60 s limit: the two given back at t0 go.
  EXPECT_EQ(pool.sweep(t0 + 60s, 60s, none_gone), 2u);
  EXPECT_EQ(pool.idle_count(0), 2u);
  EXPECT_EQ(pool.idle_count(2), 3u);
  // Endpoint 1 leaves the pool: its idle connection goes whatever its age.
  EXPECT_EQ(pool.sweep(t0 + 61s, 60s, [](std::size_t e) { return e == 1; }), 1u);
  EXPECT_EQ(pool.idle_count(1), 0u);
  // The most recent is the one taken; the oldest goes first at the sweep.
  auto taken = pool.take(0);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->idle_since, t0 + 50s);
  EXPECT_EQ(pool.sweep(t0 + 95s, 60s, none_gone), 1u);  // the one from t0 + 30s
  EXPECT_EQ(pool.idle_count(0), 0u);
  EXPECT_EQ(pool.idle_count(2), 3u);  // t0 + 59s: not yet
}

// At shutdown the pool is closed for good: what a finishing request gives
// back afterwards is closed, not kept (its stream's timer wait would keep
// the I/O thread's loop running until the upstream idle deadline).
TEST(UpstreamPool, AfterCloseAllWhatIsGivenBackIsClosed) {
  boost::asio::io_context ioc;
  UpstreamPool pool(1, 4);
  auto c = std::make_unique<UpstreamConnection>(ioc.get_executor(), 0);
  c->stream.socket().open(boost::asio::ip::tcp::v4());
  pool.give_back(std::move(c));
  EXPECT_EQ(pool.idle_count(0), 1u);
  pool.close_all();
  EXPECT_EQ(pool.idle_count(0), 0u);
  auto late = std::make_unique<UpstreamConnection>(ioc.get_executor(), 0);
  late->stream.socket().open(boost::asio::ip::tcp::v4());
  late->stream.expires_after(std::chrono::seconds(120));
  pool.give_back(std::move(late));
  EXPECT_EQ(pool.idle_count(0), 0u);
  EXPECT_FALSE(pool.take(0));
}

}  // namespace
}  // namespace sluice::server
