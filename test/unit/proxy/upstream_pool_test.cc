// The I/O thread's pool of idle upstream connections: bounded per endpoint,
// and swept of connections idle too long or to endpoints that left.
#include "proxy/upstream_pool.h"

#include <gtest/gtest.h>

#include <boost/asio/write.hpp>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

TEST(UpstreamPool, SweepClosesTheLongIdleAndThoseOfEndpointsThatLeft) {
  boost::asio::io_context ioc;
  UpstreamPool pool(3, 4);
  const TimePoint t0{};
  auto conn = [&](std::size_t e) {
    auto c = std::make_unique<UpstreamConnection>(ioc.get_executor(), e);
    c->stream.socket().open(boost::asio::ip::tcp::v4());  // a closed one is not kept
    return c;
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
// back afterwards is closed, not kept. A kept one would hold its stream's
// timer wait (armed by its last read, for the upstream idle timeout) and so
// its I/O thread's loop until that deadline: the loop must end at once.
TEST(UpstreamPool, AfterCloseAllWhatIsGivenBackIsClosedAndHoldsNoWork) {
  namespace net = boost::asio;
  using tcp = net::ip::tcp;
  net::io_context ioc{1};
  UpstreamPool pool(1, 4);
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  auto c = std::make_unique<UpstreamConnection>(ioc.get_executor(), 0);
  c->stream.socket().connect(acceptor.local_endpoint());
  Socket peer(ioc.get_executor());
  acceptor.accept(peer);
  acceptor.close();
  net::write(peer, net::buffer("x", 1));
  c->stream.expires_after(std::chrono::seconds(120));
  char byte = 0;
  bool read = false;
  c->stream.async_read_some(net::buffer(&byte, 1),
                            [&](boost::system::error_code ec, std::size_t) { read = !ec; });
  const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!read && std::chrono::steady_clock::now() < stop)
    ioc.run_one_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(read);
  EXPECT_EQ(c->stream.timer_waits(), 1u);  // still armed: the 120 s deadline

  pool.close_all();
  pool.give_back(std::move(c));
  EXPECT_EQ(pool.idle_count(0), 0u);
  EXPECT_FALSE(pool.take(0));
  peer.close();
  const auto start = std::chrono::steady_clock::now();
  ioc.run_for(std::chrono::seconds(5));
  EXPECT_TRUE(ioc.stopped());  // out of work, not out of time
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

// A connection whose socket is closed (a timeout closed it, or the endpoint
// reset it) is never pooled for the next request.
TEST(UpstreamPool, AClosedConnectionIsNotKept) {
  boost::asio::io_context ioc;
  UpstreamPool pool(1, 4);
  pool.give_back(std::make_unique<UpstreamConnection>(ioc.get_executor(), 0));
  EXPECT_EQ(pool.idle_count(0), 0u);
}

}  // namespace
}  // namespace sluice::proxy
