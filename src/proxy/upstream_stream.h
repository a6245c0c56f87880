// An upstream connection's byte stream: the TCP stream with its deadline
// (proxy/timed_stream.h), and towards a TLS model server a TLS session over
// it (the client side; datalayer/upstream_tls.h). The exchange reads and writes
// through the same calls either way; the deadline bounds the handshake and
// every record as it bounds plain reads and writes.
//
// socket() is the raw socket, for what never carries application bytes
// under TLS: readiness hints, the pool's open check, shutdown. A send of
// application bytes on it is plain-TCP only (tls() false).
//
// One thread: the connection's I/O thread.
#pragma once

#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_stream.hpp>
#include <memory>
#include <string>
#include <utility>

#include "datalayer/upstream_tls.h"
#include "proxy/timed_stream.h"

namespace sluice::proxy {

// The TLS layer's transport: the connection's TimedStream, so its deadline
// applies to the handshake and to every record.
class TlsTransport {
 public:
  using executor_type = Executor;
  using lowest_layer_type = Socket;

  explicit TlsTransport(TimedStream& s) : s_(&s) {}
  executor_type get_executor() noexcept { return s_->get_executor(); }
  lowest_layer_type& lowest_layer() noexcept { return s_->socket(); }
  const lowest_layer_type& lowest_layer() const noexcept { return s_->socket(); }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    s_->async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    s_->async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  TimedStream* s_;
};

class UpstreamStream {
 public:
  using executor_type = Executor;
  using clock = TimedStream::clock;

  explicit UpstreamStream(Executor ex) : tcp_(std::move(ex)) {}

  executor_type get_executor() noexcept { return tcp_.get_executor(); }
  Socket& socket() noexcept { return tcp_.socket(); }
  const Socket& socket() const noexcept { return tcp_.socket(); }
  void expires_after(clock::duration d) { tcp_.expires_after(d); }
  bool timed_out() const { return tcp_.timed_out(); }
  void close() { tcp_.close(); }
  void cancel() { tcp_.cancel(); }
  bool tls() const noexcept { return tls_ != nullptr; }
  std::uint64_t timer_waits() const { return tcp_.timer_waits(); }  // (tests)

  template <class Handler>
  void async_connect(const boost::asio::ip::tcp::endpoint& to, Handler&& handler) {
    tcp_.async_connect(to, std::forward<Handler>(handler));
  }
  // Once connected: a TLS session towards `name` (SNI and the name
  // verified). False if OpenSSL refuses the name.
  bool start_tls(std::shared_ptr<const datalayer::UpstreamTls> config, const std::string& name) {
    tls_ = std::make_unique<Tls>(tcp_, std::move(config));
    return datalayer::prepare_upstream_session(tls_->stream.next_layer().native_handle(),
                                               *tls_->config, name);
  }
  // TLS only: the client's half of the handshake, under the deadline.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    tls_->stream.next_layer().async_handshake(boost::asio::ssl::stream_base::client,
                                              std::forward<Handler>(handler));
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_)
      tls_->stream.async_read_some(buffers, std::forward<Handler>(handler));
    else
      tcp_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_)
      tls_->stream.async_write_some(buffers, std::forward<Handler>(handler));
    else
      tcp_.async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  struct Tls {
    Tls(TimedStream& transport, std::shared_ptr<const datalayer::UpstreamTls> c)
        : config(std::move(c)), stream(TlsTransport(transport), *config->context) {}
    std::shared_ptr<const datalayer::UpstreamTls> config;  // before stream: outlives its SSL
    boost::beast::flat_stream<boost::asio::ssl::stream<TlsTransport>> stream;
  };
  TimedStream tcp_;
  std::unique_ptr<Tls> tls_;  // after tcp_: destroyed first
};

}  // namespace sluice::proxy
