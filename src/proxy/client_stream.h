// A client connection's byte stream: the TCP stream with its deadline
// (proxy/timed_stream.h), and on the TLS listener a TLS session over it.
// The connection and its exchange read and write through the same calls
// either way; the deadline bounds the TLS handshake and every record read
// or written, as it bounds plain reads and writes.
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

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_stream.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "proxy/timed_stream.h"
#include "proxy/tls_context.h"

namespace sluice::proxy {

// The TLS layer's transport: the connection's TimedStream, so its deadline
// applies to the handshake and to every record. After end_reads() a read
// ends at once with EOF: a close_notify is written without waiting for the
// client's (nginx's one-way TLS shutdown).
class TlsTransport {
 public:
  using executor_type = Executor;
  using lowest_layer_type = Socket;

  explicit TlsTransport(TimedStream& s) : s_(&s) {}
  executor_type get_executor() noexcept { return s_->get_executor(); }
  lowest_layer_type& lowest_layer() noexcept { return s_->socket(); }
  const lowest_layer_type& lowest_layer() const noexcept { return s_->socket(); }
  void end_reads() { reads_ended_ = true; }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (reads_ended_) {
      boost::asio::post(s_->get_executor(),
                        boost::beast::bind_handler(std::forward<Handler>(handler),
                                                   boost::asio::error::eof, std::size_t{0}));
      return;
    }
    s_->async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    s_->async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  TimedStream* s_;
  bool reads_ended_ = false;
};

// One connection's TLS state: the context it started with (a reload does
// not change it), the session, and what its handshake established.
class TlsSession {
 public:
  // The TLS stream; writes of several buffers are flattened into one record
  // (an SSL stream writes one buffer per record).
  using Stream = boost::beast::flat_stream<boost::asio::ssl::stream<TlsTransport>>;

  TlsSession(TimedStream& transport, std::shared_ptr<TlsServerContext> context)
      : context_(std::move(context)), stream_(TlsTransport(transport), context_->ssl()) {}

  Stream& stream() { return stream_; }
  boost::asio::ssl::stream<TlsTransport>& ssl() { return stream_.next_layer(); }
  // After a successful handshake: the verified client certificate's name.
  void established() {
    established_ = true;
    peer_name_ = verified_peer_name(ssl().native_handle());
  }
  bool is_established() const { return established_; }
  std::string_view peer_name() const { return peer_name_; }

 private:
  std::shared_ptr<TlsServerContext> context_;  // before stream_: outlives its SSL
  Stream stream_;
  std::string peer_name_;
  bool established_ = false;
};

class ClientStream {
 public:
  using executor_type = Executor;

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
    if (tls_)
      tls_->stream().async_read_some(buffers, std::forward<Handler>(handler));
    else
      tcp_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_)
      tls_->stream().async_write_some(buffers, std::forward<Handler>(handler));
    else
      tcp_.async_write_some(buffers, std::forward<Handler>(handler));
  }

  // TLS only. The server's half of the handshake, under the deadline.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    tls_->ssl().async_handshake(boost::asio::ssl::stream_base::server,
                                std::forward<Handler>(handler));
  }
  void handshake_done() { tls_->established(); }
  // TLS only, once nothing else is pending: writes a close_notify, without
  // waiting for the client's; then the handler runs (the caller closes).
  template <class Handler>
  void async_close_notify(Handler&& handler) {
    tls_->ssl().next_layer().end_reads();
    tls_->ssl().async_shutdown(std::forward<Handler>(handler));
  }
  // A close_notify is worth writing: a TLS session established and the
  // socket not closed by a deadline.
  bool can_close_notify() const { return tls_ && tls_->is_established() && !tcp_.timed_out(); }
  std::string_view peer_name() const { return tls_ ? tls_->peer_name() : std::string_view(); }

 private:
  TimedStream tcp_;
  std::unique_ptr<TlsSession> tls_;  // after tcp_: destroyed first
};

}  // namespace sluice::proxy
