#include "proxy/reactor_hint.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/write.hpp>
#include <boost/version.hpp>
#include <string>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Two connected loopback sockets on one io_context.
struct Pair {
  net::io_context ioc{1};
  Socket a{ioc.get_executor()};
  Socket b{ioc.get_executor()};
  Pair() {
    tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    a.connect(acceptor.local_endpoint());
    acceptor.accept(b);
  }
  void send_from_b(const std::string& bytes) { net::write(b, net::buffer(bytes)); }
};

// The build Debian 12 gives (Boost 1.81, epoll) has the hint: if a Boost
// upgrade turned it off, this says so rather than the benchmark.
TEST(ReactorHint, IsSupportedOnThisBuild) {
#if BOOST_VERSION == 108100 && defined(__linux__)
  EXPECT_TRUE(reactor_hint_supported());
#else
  GTEST_SKIP() << "the hint is for Boost 1.81's epoll reactor; this is " << BOOST_LIB_VERSION;
#endif
}

// Bytes that arrive after the hint (a readiness event after it) complete the
// read as before, and so does the peer's close.
TEST(ReactorHint, ReadsStillCompleteOnWhatArrivesAfterTheHint) {
  for (const bool close : {false, true}) {
    Pair p;
    skip_next_speculative_read(p.a);
    char buf[16];
    bool done = false;
    boost::system::error_code got;
    std::size_t n = 0;
    p.a.async_read_some(net::buffer(buf), [&](boost::system::error_code ec, std::size_t k) {
      done = true;
      got = ec;
      n = k;
    });
    p.ioc.poll();
    EXPECT_FALSE(done);  // nothing to read yet
    if (close) {
      p.b.close();
    } else {
      p.send_from_b("hello");
    }
    p.ioc.run_one_for(std::chrono::seconds(5));
    ASSERT_TRUE(done) << (close ? "close" : "bytes");
    if (close) {
      EXPECT_EQ(got, net::error::eof);
    } else {
      EXPECT_FALSE(got);
      EXPECT_EQ(std::string(buf, n), "hello");
    }
  }
}

// What the hint does, and the one thing it may lose: bytes whose readiness
// event the reactor took in, with no read pending, before the hint. Without
// the hint the next read takes them at once (a receive first); with it the
// read waits for the next event, and then gets them along with what came.
TEST(ReactorHint, TheNextReadWaitsForAFreshEventInsteadOfTryingFirst) {
  if (!reactor_hint_supported()) GTEST_SKIP() << "no hint in this build";
  for (const bool hint : {false, true}) {
    Pair p;
    p.send_from_b("early");
    // Let the reactor see the readiness while no read is pending: a
    // blocking wait for it, then rounds of the reactor to take the event
    // (the work guard makes poll() run the reactor with nothing pending).
    p.a.wait(tcp::socket::wait_read);
    {
      auto guard = net::make_work_guard(p.ioc);
      for (int i = 0; i < 3; ++i) p.ioc.poll();
    }
    p.ioc.restart();  // the guard's release, the last work, stopped it
    if (hint) skip_next_speculative_read(p.a);
    char buf[32];
    bool done = false;
    std::size_t n = 0;
    p.a.async_read_some(net::buffer(buf), [&](boost::system::error_code ec, std::size_t k) {
      done = !ec;
      n = k;
    });
    for (int i = 0; i < 3; ++i) p.ioc.poll();
    if (!hint) {
      ASSERT_TRUE(done) << "without the hint the read tries a receive first";
      EXPECT_EQ(std::string(buf, n), "early");
      continue;
    }
    EXPECT_FALSE(done) << "with the hint the read waits for an event";
    p.send_from_b("late");
    p.ioc.run_one_for(std::chrono::seconds(5));
    ASSERT_TRUE(done);
    EXPECT_EQ(std::string(buf, n), "earlylate");
  }
}

// The hazard the mid-stream hint brings, and its repair. The peer's last
// bytes and its close are both there when the reactor takes the readiness
// event; the read gets the bytes, its completion gives the hint, and the
// next read waits for an event that never comes (the close is not new).
// rearm_read_readiness has the reactor report the descriptor again, and the
// read ends with end-of-stream. Without the hint the next read tries a
// receive and sees the close at once.
TEST(ReactorHint, ACloseThatCameWithTheLastBytesIsFoundAgainByARearm) {
  if (!reactor_hint_supported()) GTEST_SKIP() << "no hint in this build";
  for (const bool hint : {false, true}) {
    Pair p;
    char buf[32];
    bool first = false, second = false;
    boost::system::error_code second_ec;
    std::size_t n = 0;
    p.a.async_read_some(net::buffer(buf), [&](boost::system::error_code ec, std::size_t k) {
      first = !ec;
      n = k;
      if (hint) skip_next_speculative_read(p.a);
      p.a.async_read_some(net::buffer(buf), [&](boost::system::error_code ec2, std::size_t) {
        second = true;
        second_ec = ec2;
      });
    });
    p.ioc.poll();  // the first read waits: nothing has come
    ASSERT_FALSE(first);
    p.send_from_b("last");
    p.b.shutdown(tcp::socket::shutdown_send);
    for (int i = 0; i < 3; ++i) p.ioc.poll();
    ASSERT_TRUE(first);
    EXPECT_EQ(std::string(buf, n), "last");
    if (!hint) {
      ASSERT_TRUE(second) << "without the hint the next read tries a receive first";
      EXPECT_EQ(second_ec, net::error::eof);
      continue;
    }
    EXPECT_FALSE(second) << "the close came with the bytes: no new event reports it";
    EXPECT_TRUE(rearm_read_readiness(p.a));
    p.ioc.run_one_for(std::chrono::seconds(5));
    ASSERT_TRUE(second);
    EXPECT_EQ(second_ec, net::error::eof);
  }
}

// A rearm of a socket with nothing to report reports nothing, and one of a
// closed socket does nothing.
TEST(ReactorHint, ARearmWithNothingToReportCompletesNothing) {
  if (!reactor_hint_supported()) GTEST_SKIP() << "no hint in this build";
  Pair p;
  char buf[8];
  bool done = false;
  p.a.async_read_some(net::buffer(buf),
                      [&](boost::system::error_code, std::size_t) { done = true; });
  p.ioc.poll();
  EXPECT_TRUE(rearm_read_readiness(p.a));
  for (int i = 0; i < 3; ++i) p.ioc.poll();
  EXPECT_FALSE(done);
  p.send_from_b("x");
  p.ioc.run_one_for(std::chrono::seconds(5));
  EXPECT_TRUE(done);
  p.a.close();
  EXPECT_FALSE(rearm_read_readiness(p.a));
}

}  // namespace
}  // namespace sluice::proxy
