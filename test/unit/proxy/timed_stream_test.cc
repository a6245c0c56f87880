#include "proxy/timed_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/write.hpp>
#include <memory>
#include <string>
#include <vector>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A TimedStream connected over loopback to a plain socket, on one io_context.
struct Pair {
  net::io_context ioc{1};
  std::unique_ptr<TimedStream> a = std::make_unique<TimedStream>(ioc.get_executor());
  Socket b{ioc.get_executor()};
  Pair() {
    tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    a->socket().connect(acceptor.local_endpoint());
    acceptor.accept(b);
  }
  void send_from_b(const std::string& bytes) { net::write(b, net::buffer(bytes)); }
  // Runs `f` on the loop at `when` (a timer of the test, not a sleep).
  template <class F>
  void at(Clock::time_point when, F f) {
    auto t = std::make_shared<net::steady_timer>(ioc, when);
    t->async_wait([t, f](error_code) { f(); });
  }
  // Runs the loop until `done` or 10 s.
  void run_until(const bool& done) {
    const auto stop = Clock::now() + 10s;
    while (!done && Clock::now() < stop) {
      if (ioc.stopped()) ioc.restart();  // it ran out of work before this operation
      ioc.run_one_for(50ms);
    }
  }
};

struct ReadResult {
  bool done = false;
  error_code ec;
  std::size_t n = 0;
  Clock::time_point when;
};

void start_read(Pair& p, char (&buf)[64], ReadResult& r) {
  p.a->async_read_some(net::buffer(buf), [&r](error_code ec, std::size_t n) {
    r.done = true;
    r.ec = ec;
    r.n = n;
    r.when = Clock::now();
  });
}

TEST(TimedStream, AReadPendingPastItsDeadlineTimesOutAndClosesTheSocket) {
  Pair p;
  char buf[64];
  ReadResult r;
  const auto start = Clock::now();
  p.a->expires_after(50ms);
  start_read(p, buf, r);
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, boost::beast::error::timeout) << r.ec.message();
  EXPECT_GE(r.when - start, 50ms);
  EXPECT_FALSE(p.a->socket().is_open());
  EXPECT_TRUE(p.a->timed_out());
}

TEST(TimedStream, AnOperationStartedAfterTheDeadlineTimesOutAtOnce) {
  Pair p;
  char buf[64];
  ReadResult r;
  p.a->expires_at(Clock::now() - 1ms);
  start_read(p, buf, r);
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, boost::beast::error::timeout);
}

// The usual case: each request moves the deadline later. The stream's one
// wait is started once, and the reads complete as data arrives.
TEST(TimedStream, ManyOperationsUnderAMovingDeadlineStartOneWait) {
  Pair p;
  char buf[64];
  for (int i = 0; i < 100; ++i) {
    ReadResult r;
    p.a->expires_after(10s);
    start_read(p, buf, r);
    p.send_from_b("x");
    p.run_until(r.done);
    ASSERT_TRUE(r.done);
    ASSERT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(r.n, 1u);
  }
  EXPECT_EQ(p.a->timer_waits(), 1u);
  // With basic_stream's semantics: the socket stays open, nothing timed out.
  EXPECT_TRUE(p.a->socket().is_open());
  EXPECT_FALSE(p.a->timed_out());
}

// A deadline moved later while a read waits: the wait armed for the first
// one, on firing, waits again for the new one; the read completes with the
// data that comes after the first deadline.
TEST(TimedStream, ADeadlineMovedLaterWhilePendingIsHonoured) {
  Pair p;
  char buf[64];
  ReadResult r;
  const auto start = Clock::now();
  p.a->expires_at(start + 100ms);
  start_read(p, buf, r);
  p.at(start + 40ms, [&] { p.a->expires_at(start + 5s); });
  p.at(start + 250ms, [&] { p.send_from_b("late"); });
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(r.n, 4u);
  EXPECT_GE(r.when - start, 250ms);
  EXPECT_EQ(p.a->timer_waits(), 2u);  // at 100 ms, then again for 5 s
}

// A nearer deadline while a read waits replaces the farther wait.
TEST(TimedStream, ANearerDeadlineWhilePendingTimesOutThen) {
  Pair p;
  char buf[64];
  ReadResult r;
  const auto start = Clock::now();
  p.a->expires_after(30s);
  start_read(p, buf, r);
  p.a->expires_at(start + 60ms);
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, boost::beast::error::timeout);
  EXPECT_GE(r.when - start, 60ms);
  EXPECT_LT(r.when - start, 10s);
  EXPECT_EQ(p.a->timer_waits(), 2u);
}

TEST(TimedStream, ExpiresNeverLiftsTheDeadline) {
  Pair p;
  char buf[64];
  ReadResult r;
  const auto start = Clock::now();
  p.a->expires_at(start + 30ms);
  start_read(p, buf, r);
  p.a->expires_never();
  p.at(start + 150ms, [&] { p.send_from_b("ok"); });
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(r.n, 2u);
}

// The deadline bounds pending operations only: passing while nothing is
// pending closes nothing, and the next operation under a new deadline works.
TEST(TimedStream, ADeadlinePassingWithNothingPendingClosesNothing) {
  Pair p;
  char buf[64];
  ReadResult first;
  const auto start = Clock::now();
  p.a->expires_at(start + 30ms);
  p.send_from_b("1");
  start_read(p, buf, first);
  p.run_until(first.done);
  ASSERT_FALSE(first.ec);
  bool waited = false;
  p.at(start + 150ms, [&] { waited = true; });
  p.run_until(waited);
  EXPECT_TRUE(p.a->socket().is_open());
  ReadResult second;
  p.a->expires_after(5s);
  p.send_from_b("2");
  start_read(p, buf, second);
  p.run_until(second.done);
  EXPECT_FALSE(second.ec) << second.ec.message();
  EXPECT_FALSE(p.a->timed_out());
}

TEST(TimedStream, AWriteToAPeerThatDoesNotReadTimesOut) {
  Pair p;
  const std::string chunk(1 << 20, 'x');
  std::vector<net::const_buffer> buffers(64, net::buffer(chunk));  // 64 MB
  bool done = false;
  error_code got;
  p.a->expires_after(100ms);
  net::async_write(*p.a, buffers, [&](error_code ec, std::size_t) {
    done = true;
    got = ec;
  });
  p.run_until(done);
  ASSERT_TRUE(done);
  EXPECT_EQ(got, boost::beast::error::timeout);
}

TEST(TimedStream, CancelAbortsWithoutATimeout) {
  Pair p;
  char buf[64];
  ReadResult r;
  p.a->expires_after(10s);
  start_read(p, buf, r);
  p.a->cancel();
  p.run_until(r.done);
  EXPECT_EQ(r.ec, net::error::operation_aborted);
  EXPECT_TRUE(p.a->socket().is_open());
  EXPECT_FALSE(p.a->timed_out());
}

// Destroying the stream with a read and a timer wait pending: the read
// completes aborted after the stream is gone (its handler holds the shared
// state; AddressSanitizer checks nothing freed is touched).
TEST(TimedStream, DestroyingTheStreamWithOperationsPendingAbortsThem) {
  Pair p;
  char buf[64];
  ReadResult r;
  p.a->expires_after(10s);
  start_read(p, buf, r);
  p.a.reset();
  p.run_until(r.done);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.ec, net::error::operation_aborted);
  p.ioc.poll();  // the cancelled timer wait runs too
}

// What a shutdown relies on: a stream whose last operation left its timer
// wait armed holds no work on the io_context once closed.
TEST(TimedStream, AClosedStreamHoldsNoWork) {
  Pair p;
  char buf[64];
  ReadResult r;
  p.a->expires_after(120s);
  p.send_from_b("x");
  start_read(p, buf, r);
  p.run_until(r.done);
  ASSERT_FALSE(r.ec);
  EXPECT_EQ(p.a->timer_waits(), 1u);  // armed for 120 s, nothing pending
  p.a->close();
  p.b.close();
  const auto start = Clock::now();
  p.ioc.run_for(5s);
  EXPECT_TRUE(p.ioc.stopped());
  EXPECT_LT(Clock::now() - start, 4s);
}

// A handler may destroy the stream it completed on (a session ending).
TEST(TimedStream, AHandlerMayDestroyItsStream) {
  Pair p;
  char buf[64];
  bool done = false;
  p.a->expires_after(10s);
  p.send_from_b("bye");
  p.a->async_read_some(net::buffer(buf), [&](error_code ec, std::size_t) {
    EXPECT_FALSE(ec);
    p.a.reset();
    done = true;
  });
  p.run_until(done);
  ASSERT_TRUE(done);
  p.ioc.poll();  // the cancelled timer wait runs after the stream is gone
}

TEST(TimedStream, AConnectThatCannotCompleteInTimeTimesOut) {
  // A listener whose backlog is full does not complete the handshake: the
  // connect is left pending (Linux drops the SYN) until the deadline.
  net::io_context ioc{1};
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  acceptor.listen(0);
  std::vector<std::unique_ptr<Socket>> fillers;
  const auto to = acceptor.local_endpoint();
  for (int i = 0; i < 8; ++i) {
    auto s = std::make_unique<Socket>(ioc.get_executor());
    s->open(tcp::v4());
    s->non_blocking(true);
    // The system call, not Asio's connect (which waits for the handshake).
    (void)::connect(s->native_handle(), to.data(), static_cast<socklen_t>(to.size()));
    fillers.push_back(std::move(s));
  }
  TimedStream stream(ioc.get_executor());
  bool done = false;
  error_code got;
  stream.expires_after(200ms);
  stream.async_connect(acceptor.local_endpoint(), [&](error_code ec) {
    done = true;
    got = ec;
  });
  const auto stop = Clock::now() + 10s;
  while (!done && Clock::now() < stop) ioc.run_one_for(50ms);
  ASSERT_TRUE(done);
  if (!got) GTEST_SKIP() << "this kernel completed the connect despite the full backlog";
  EXPECT_EQ(got, boost::beast::error::timeout) << got.message();
}

}  // namespace
}  // namespace sluice::proxy
