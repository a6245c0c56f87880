// A TCP stream with a deadline, for the proxy's client and upstream
// connections: what beast::basic_stream gave them, at the cost of one timer
// wait per deadline period instead of per operation.
//
// beast::basic_stream starts a timer wait with every read and write and
// cancels it when the operation completes: per small request, four waits
// armed and four cancelled (each cancel another completion through the
// event loop, under the reactor's lock), and every read goes through
// `recvmsg` because the buffers are wrapped for its rate policy. Here the
// deadline is a field. expires_after() stores it; an operation that starts
// arms the stream's one timer only if none is armed at or before the
// deadline. When the timer fires it looks again: the deadline moved later
// (the usual case: the next request, the next chunk) → it waits again for
// that; the deadline passed with an operation pending → the socket is
// closed and every pending operation completes with beast::error::timeout,
// as with basic_stream. So a keep-alive connection pays a timer wait about
// once per timeout period, not per request, and a single buffer is read
// and written with `recv` / `send`.
//
// Semantics kept from basic_stream: the deadline bounds the operations
// pending when it passes and those started after it (they time out at
// once); expires_never() lifts it; a timeout closes the socket; the
// destructor closes it and its pending operations complete with
// operation_aborted. Not kept: rate limiting (never used here).
//
// One thread: the stream, its operations and its timer belong to the
// io_context of one I/O thread (concurrency hint 1); the shared state's
// count is not atomic.
#pragma once

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/handler_continuation_hook.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <cstdint>
#include <utility>

namespace sluice::proxy {

// Streams bound to the concrete executor of an I/O thread's io_context: no
// type-erased executor copies inside every asynchronous operation.
using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;

class TimedStream {
 public:
  using executor_type = Executor;
  using clock = std::chrono::steady_clock;

  explicit TimedStream(Executor ex) : s_(new State(Socket(ex))) {}
  explicit TimedStream(Socket socket) : s_(new State(std::move(socket))) {}
  ~TimedStream() {
    close();
    s_->release();
  }
  TimedStream(const TimedStream&) = delete;
  TimedStream& operator=(const TimedStream&) = delete;

  executor_type get_executor() noexcept { return s_->socket.get_executor(); }
  Socket& socket() noexcept { return s_->socket; }
  const Socket& socket() const noexcept { return s_->socket; }

  // The pending and the next operations must end by now + d.
  void expires_after(clock::duration d) {
    const auto now = clock::now();
    // Saturating: a configured timeout of centuries is "never", not a wrap
    // into the past.
    expires_at(d >= clock::time_point::max() - now ? clock::time_point::max() : now + d);
  }
  void expires_at(clock::time_point when) {
    s_->deadline = when;
    if (s_->pending > 0) s_->arm();
  }
  void expires_never() { s_->deadline = clock::time_point::max(); }
  // Whether the last deadline that passed closed the socket.
  bool timed_out() const { return s_->timed_out; }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    begin();
    s_->socket.async_read_some(buffers,
                               Op<std::decay_t<Handler>>(s_, std::forward<Handler>(handler)));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    begin();
    s_->socket.async_write_some(buffers,
                                Op<std::decay_t<Handler>>(s_, std::forward<Handler>(handler)));
  }
  // Readiness of the socket (a TLS session's reads and writes wait for it),
  // under the deadline like a read or write.
  template <class Handler>
  void async_wait(boost::asio::socket_base::wait_type what, Handler&& handler) {
    begin();
    s_->socket.async_wait(what,
                          ConnectOp<std::decay_t<Handler>>(s_, std::forward<Handler>(handler)));
  }
  template <class Handler>
  void async_connect(const boost::asio::ip::tcp::endpoint& to, Handler&& handler) {
    begin();
    s_->socket.async_connect(to,
                             ConnectOp<std::decay_t<Handler>>(s_, std::forward<Handler>(handler)));
  }

  // Closes the socket (pending operations complete with operation_aborted)
  // and ends the timer's wait: a closed stream holds no work on its
  // io_context (a shutting-down I/O thread's loop ends when none is left).
  void close() {
    boost::system::error_code ignored;
    s_->socket.close(ignored);
    s_->timer.cancel();
    s_->armed = clock::time_point::max();  // a reopened socket's next operation arms afresh
    ++s_->generation;                      // the cancelled wait, when it runs, is stale
  }
  // Pending operations complete with operation_aborted (not a timeout).
  void cancel() {
    boost::system::error_code ignored;
    s_->socket.cancel(ignored);
  }

  // For tests: how many timer waits this stream has started.
  std::uint64_t timer_waits() const { return s_->waits; }

 private:
  // Shared by the stream and its pending operations (their handlers keep it
  // alive until they run, as basic_stream's do); counted on one thread.
  struct State {
    explicit State(Socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
    Socket socket;
    boost::asio::basic_waitable_timer<clock, boost::asio::wait_traits<clock>, Executor> timer;
    clock::time_point deadline = clock::time_point::max();
    clock::time_point armed = clock::time_point::max();  // the timer's wait, if one is pending
    std::uint64_t generation = 0;  // of the timer's wait: an older one that completes is ignored
    std::uint64_t waits = 0;
    std::uint32_t refs = 1;
    std::uint32_t pending = 0;  // operations started and not completed
    bool timed_out = false;

    void retain() noexcept { ++refs; }
    void release() noexcept {
      if (--refs == 0) delete this;
    }
    // Makes sure a timer wait ends at or before the deadline.
    void arm() {
      if (deadline == clock::time_point::max() || armed <= deadline) return;
      armed = deadline;
      timer.expires_at(deadline);  // cancels a later wait: it completes aborted, ignored
      ++waits;
      timer.async_wait(Fired{Ref(this), ++generation});
    }
    void fired(boost::system::error_code ec, std::uint64_t g) {
      if (g != generation) return;  // superseded by a nearer deadline
      armed = clock::time_point::max();
      if (ec || pending == 0 || !socket.is_open()) return;  // the next operation arms again
      if (clock::now() < deadline) return arm();            // moved later meanwhile
      timed_out = true;
      boost::system::error_code ignored;
      socket.close(ignored);  // pending operations complete, aborted → reported as timeout
    }
  };

  // A counted hold on the state, released when the holder is destroyed
  // (also when an io_context is destroyed with the handler not run).
  class Ref {
   public:
    explicit Ref(State* s) noexcept : s_(s) { s_->retain(); }
    Ref(const Ref& o) noexcept : s_(o.s_) { s_->retain(); }
    Ref(Ref&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Ref& operator=(const Ref&) = delete;
    Ref& operator=(Ref&&) = delete;
    ~Ref() { reset(); }
    void reset() noexcept {
      if (s_) std::exchange(s_, nullptr)->release();
    }
    State* operator->() const noexcept { return s_; }

   private:
    State* s_;
  };
  struct Fired {
    Ref s;
    std::uint64_t generation;
    void operator()(boost::system::error_code ec) { s->fired(ec, generation); }
  };

  void begin() {
    ++s_->pending;
    if (s_->deadline != clock::time_point::max() && s_->armed > s_->deadline) s_->arm();
  }

  // Holds the state while the operation is pending; on completion reports a
  // timeout as basic_stream does, then calls the handler.
  template <class Handler>
  class OpBase {
   public:
    using executor_type = boost::asio::associated_executor_t<Handler, Executor>;
    using allocator_type = boost::asio::associated_allocator_t<Handler>;

    OpBase(State* s, Handler&& h) : s_(s), ex_(s->socket.get_executor()), h_(std::move(h)) {}
    OpBase(State* s, const Handler& h) : s_(s), ex_(s->socket.get_executor()), h_(h) {}
    OpBase(OpBase&&) noexcept = default;
    OpBase(const OpBase&) = delete;
    OpBase& operator=(const OpBase&) = delete;
    OpBase& operator=(OpBase&&) = delete;

    executor_type get_executor() const noexcept {
      return boost::asio::get_associated_executor(h_, ex_);
    }
    allocator_type get_allocator() const noexcept {
      return boost::asio::get_associated_allocator(h_);
    }
    friend bool asio_handler_is_continuation(OpBase* op) {
      return boost_asio_handler_cont_helpers::is_continuation(op->h_);
    }

   protected:
    // Ends the operation's hold on the state before the handler runs (it may
    // start the next operation, or destroy the stream).
    boost::system::error_code finish(boost::system::error_code ec) {
      --s_->pending;
      // Also a completion that was already queued, successful, when the
      // deadline closed the socket: what it read or wrote is on a closed
      // connection now (basic_stream reports timeout then too).
      if (s_->timed_out) ec = boost::beast::error::timeout;
      s_.reset();
      return ec;
    }
    Ref s_;
    Executor ex_;
    Handler h_;
  };

  template <class Handler>
  struct Op : OpBase<Handler> {
    using OpBase<Handler>::OpBase;
    void operator()(boost::system::error_code ec, std::size_t n) {
      ec = this->finish(ec);
      std::move(this->h_)(ec, n);
    }
  };
  // A connect's or a readiness wait's: the handler takes the error only.
  template <class Handler>
  struct ConnectOp : OpBase<Handler> {
    using OpBase<Handler>::OpBase;
    void operator()(boost::system::error_code ec) {
      ec = this->finish(ec);
      std::move(this->h_)(ec);
    }
  };

  State* s_;
};

}  // namespace sluice::proxy
