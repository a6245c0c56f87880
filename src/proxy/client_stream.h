// A client connection's byte stream: the TCP stream with its deadline
// (proxy/timed_stream.h), and on the TLS listener a TLS session over it
// (proxy/tls_channel.h). The connection and its exchange read and write
// through the same calls either way; the deadline bounds the TLS handshake
// and every wait for the socket, as it bounds plain reads and writes.
//
// try_send() is the write that does not wait, on either: plain, a send;
// TLS, the bytes encrypted and what the kernel takes sent now. After it,
// flushed() false (TLS only) means ciphertext is waiting: async_flush()
// sends it under the deadline.
//
// socket() is the raw socket, for what never carries application bytes:
// readiness waits, a peek or poll for the client's close (a FIN or reset is
// seen there under TLS too), shutdown, and, once the answer is out, the
// lingering close's drain. A send on it of application bytes is plain-TCP
// only (tls() false): on a TLS connection it would put plaintext on the
// wire.
//
// One thread: the connection's I/O thread.
#pragma once

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "proxy/timed_stream.h"
#include "proxy/tls_channel.h"
#include "proxy/tls_context.h"
#include "proxy/wire.h"

namespace sluice::proxy {

// One connection's TLS state: the context it started with (a reload does
// not change it), the session, and what its handshake established.
class TlsSession {
 public:
  TlsSession(TimedStream& transport, std::shared_ptr<TlsServerContext> context)
      : context_(std::move(context)),
        channel_(context_->ssl().native_handle(), transport.socket().native_handle()) {}

  TlsChannel& channel() { return channel_; }
  const TlsChannel& channel() const { return channel_; }
  // After a successful handshake: the verified client certificate's name.
  void established() {
    established_ = true;
    peer_name_ = verified_peer_name(channel_.native_handle());
  }
  bool is_established() const { return established_; }
  std::string_view peer_name() const { return peer_name_; }

 private:
  std::shared_ptr<TlsServerContext> context_;  // before channel_: outlives its SSL
  TlsChannel channel_;
  std::string peer_name_;
  bool established_ = false;
};

class ClientStream {
 public:
  using executor_type = Executor;
  using error_code = boost::system::error_code;

  // `tls` null: a plain connection.
  explicit ClientStream(Socket socket, std::shared_ptr<TlsServerContext> tls = nullptr)
      : tcp_(std::move(socket)) {
    if (tls) tls_ = std::make_unique<TlsSession>(tcp_, std::move(tls));
  }

  executor_type get_executor() noexcept { return tcp_.get_executor(); }
  Socket& socket() noexcept { return tcp_.socket(); }
  TimedStream& tcp() noexcept { return tcp_; }
  bool tls() const noexcept { return tls_ != nullptr; }

  void expires_after(TimedStream::clock::duration d) { tcp_.expires_after(d); }
  bool timed_out() const { return tcp_.timed_out(); }
  void close() { tcp_.close(); }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (!tls_) return tcp_.async_read_some(buffers, std::forward<Handler>(handler));
    TlsRead<MutableBuffers, std::decay_t<Handler>>{this, buffers, std::forward<Handler>(handler)}
        .step({}, true);
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (!tls_) return tcp_.async_write_some(buffers, std::forward<Handler>(handler));
    TlsWrite<ConstBuffers, std::decay_t<Handler>>{this, buffers, std::forward<Handler>(handler)}
        .step({}, true);
  }

  // How much of `b` went now (TLS: was consumed; see flushed()), or the
  // socket's or session's error in `ec`.
  std::size_t try_send(boost::asio::const_buffer b, error_code& ec) {
    if (!tls_) return wire::try_send(tcp_.socket(), b, ec);
    auto& channel = tls_->channel();
    if (!channel.flushed() && !channel.flush(ec)) return 0;
    return channel.write(&b, 1, ec);
  }
  // No ciphertext waiting for the socket (always, plain).
  bool flushed() const { return !tls_ || tls_->channel().flushed(); }
  // TLS: sends what waits, then the handler runs with (error, 0).
  template <class Handler>
  void async_flush(Handler&& handler) {
    TlsWrite<boost::asio::const_buffer, std::decay_t<Handler>> op{this, boost::asio::const_buffer(),
                                                                  std::forward<Handler>(handler)};
    op.wrote = true;
    op.step({}, true);
  }

  // TLS only. The server's half of the handshake, under the deadline.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    TlsHandshake<std::decay_t<Handler>>{this, std::forward<Handler>(handler)}.step({}, true);
  }
  void handshake_done() { tls_->established(); }
  // TLS only, once nothing else is pending: writes a close_notify, without
  // waiting for the client's (nginx's one-way shutdown); then the handler
  // runs (the caller closes).
  template <class Handler>
  void async_close_notify(Handler&& handler) {
    error_code ec;
    tls_->channel().shutdown(ec);
    auto done = [h = std::forward<Handler>(handler)](error_code e, std::size_t) mutable {
      std::move(h)(e);
    };
    if (ec) {
      boost::asio::post(get_executor(), boost::beast::bind_handler(std::move(done), ec, 0));
      return;
    }
    async_flush(std::move(done));
  }
  // A close_notify is worth writing: a TLS session established and the
  // socket not closed by a deadline.
  bool can_close_notify() const { return tls_ && tls_->is_established() && !tcp_.timed_out(); }
  std::string_view peer_name() const { return tls_ ? tls_->peer_name() : std::string_view(); }

 private:
  // The TLS operations: each tries its step on the session now, and waits
  // (under the deadline) for the readiness the session asks for before the
  // next try. A handler that completes in the initiating call is posted.
  template <class Handler, class... Args>
  void complete(bool now, Handler&& h, Args... args) {
    if (now)
      boost::asio::post(get_executor(),
                        boost::beast::bind_handler(std::forward<Handler>(h), args...));
    else
      std::forward<Handler>(h)(args...);
  }

  template <class Buffers, class Handler>
  struct TlsRead {
    ClientStream* s;
    Buffers buffers;
    Handler h;
    void operator()(error_code ec) { step(ec, false); }
    void step(error_code ec, bool now) {
      std::size_t n = 0;
      if (!ec) {
        boost::asio::mutable_buffer b;
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers) && b.size() == 0; ++it)
          b = *it;
        if (b.size() > 0) n = s->tls_->channel().read(b.data(), b.size(), ec);
        if (b.size() > 0 && n == 0 && !ec)
          return s->tcp_.async_wait(boost::asio::socket_base::wait_read, std::move(*this));
      }
      s->complete(now, std::move(h), ec, n);
    }
  };

  template <class Buffers, class Handler>
  struct TlsWrite {
    ClientStream* s;
    Buffers buffers;
    Handler h;
    std::size_t written = 0;
    bool wrote = false;
    void operator()(error_code ec) { step(ec, false); }
    void step(error_code ec, bool now) {
      auto& channel = s->tls_->channel();
      if (!ec && !channel.flushed()) channel.flush(ec);
      if (!ec && channel.flushed() && !wrote) {
        wrote = true;
        std::array<boost::asio::const_buffer, 16> pieces;
        std::size_t count = 0;
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers) && count < pieces.size(); ++it)
          pieces[count++] = *it;
        written = channel.write(pieces.data(), count, ec);
      }
      if (!ec && !channel.flushed())
        return s->tcp_.async_wait(boost::asio::socket_base::wait_write, std::move(*this));
      s->complete(now, std::move(h), ec, written);
    }
  };

  template <class Handler>
  struct TlsHandshake {
    ClientStream* s;
    Handler h;
    void operator()(error_code ec) { step(ec, false); }
    void step(error_code ec, bool now) {
      if (!ec) {
        const auto want = s->tls_->channel().handshake(ec);
        if (!ec && want != TlsChannel::Want::kNothing)
          return s->tcp_.async_wait(want == TlsChannel::Want::kRead
                                        ? boost::asio::socket_base::wait_read
                                        : boost::asio::socket_base::wait_write,
                                    std::move(*this));
      }
      s->complete(now, std::move(h), ec);
    }
  };

  TimedStream tcp_;
  std::unique_ptr<TlsSession> tls_;  // after tcp_: destroyed first
};

}  // namespace sluice::proxy
