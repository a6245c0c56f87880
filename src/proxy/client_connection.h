// One client connection (Envoy's ConnectionManagerImpl, HAProxy's session):
// the socket and its read buffer, the TLS handshake on the TLS listener,
// keep-alive and pipelining, the header and idle deadlines, the watch for a
// client that leaves while its request is queued or proxied, the lingering
// close. Each request on it is an Exchange (proxy/exchange.h).
//
// Runs entirely on its I/O thread (the single-threaded io_context is the
// connection's strand). Kept alive by shared_from_this in every handler.
#pragma once

#include <boost/beast/core.hpp>
#include <cstdint>
#include <memory>

#include "flowcontrol/outcome_response.h"
#include "proxy/client_stream.h"
#include "proxy/connection_limit.h"
#include "proxy/deferred_watch.h"
#include "proxy/exchange.h"
#include "proxy/io_thread.h"
#include "proxy/proxy_context.h"
#include "proxy/upstream_pool.h"

namespace sluice::proxy {

class ClientConnection : public std::enable_shared_from_this<ClientConnection>,
                         public DeferredWatches::Hook {
 public:
  // `tls`: the context of the TLS listener the connection came from (null:
  // plain TCP); the connection keeps it for its life.
  ClientConnection(Socket socket, IoThread& thread, ProxyContext& ctx,
                   ConnectionLimit::Permit permit = {},
                   std::shared_ptr<TlsServerContext> tls = nullptr);
  ~ClientConnection();

  void start();
  // Graceful shutdown: an idle connection closes now; a busy one finishes its
  // current response (sent with Connection: close) and then closes.
  void begin_close();
  // Deadline passed: close both sockets now.
  void force_close();
  // Flow control's decision for this connection's request (on its thread).
  void on_decision(const flowcontrol::Decision& d) { exchange_.on_decision(d); }
  // The request enrolled by IoThread::defer_watch is still open a tick later:
  // arm its client watch now (a no-op once the request has ended).
  void arm_deferred_watch();
  // The name of the client certificate the TLS handshake verified (the
  // first URI, DNS or email subject alternative name, else the subject's
  // common name); empty without one, and on plain TCP. For the auth layer.
  std::string_view client_certificate_name() const { return client_.peer_name(); }

 private:
  friend class Exchange;
  using error_code = boost::beast::error_code;
  //   kHandshake  TLS only, first: the handshake under the header deadline
  //               -> kIdle (established) | kLingering (plain HTTP: 400) |
  //               kClosed (failed, timed out)
  //   kIdle       waiting for a request (keep-alive or header deadline)
  //               -> kBusy (its first byte) | kClosed
  //   kBusy       an exchange runs (Exchange::Phase)
  //               -> kIdle (answered, keep-alive) | kLingering | kClosed
  //   kLingering  answered and closing: the client's unread input drained
  //               for a while -> kClosed
  //   kClosed     both sockets closed; handlers still queued find it so
  enum class State { kHandshake, kIdle, kBusy, kLingering, kClosed };

  void handshake();
  void on_handshake(error_code ec);
  // The exchange's requests to its connection.
  // The answer is done: the next request, or the close.
  void wait_for_request();
  void read_client(std::size_t size);
  void on_client_read(error_code ec, std::size_t n);
  // A read on the client socket while the request waits or is proxied: EOF
  // means the client left (cancel the queued request, or stop the upstream).
  void watch_client();
  void stop_watching();
  // The client closed or reset its connection (a non-blocking peek).
  bool client_gone();
  void on_watch(error_code ec, std::uint64_t generation);
  void linger();
  void drain();
  // Closes both sockets now: the client left, a deadline passed, an error.
  void close();
  // Closes after an answer, or an idle connection at shutdown: on TLS a
  // close_notify goes first (not waiting for the client's), so the client
  // can tell the end from a cut.
  void close_gracefully();

  ClientStream client_;
  boost::beast::flat_buffer buffer_;
  IoThread& thread_;
  ProxyContext& ctx_;
  ConnectionLimit::Permit permit_;  // one of server.maxConnections, for this connection's life
  IoThread::Registration registration_;
  State state_ = State::kIdle;
  bool closing_ = false;
  bool first_request_ = true;
  // The client watch. It saw bytes of a next request and went off: only a
  // look at the socket (client_gone) tells a close behind them.
  bool watching_ = false;
  bool watch_saw_bytes_ = false;
  std::uint64_t watch_generation_ = 0;
  Exchange exchange_;
};

template <void (Exchange::*Fn)(boost::beast::error_code, std::size_t)>
auto Exchange::bind() {
  return [self = conn_.shared_from_this()](boost::beast::error_code ec, std::size_t n) {
    (self->exchange_.*Fn)(ec, n);
  };
}

}  // namespace sluice::proxy
