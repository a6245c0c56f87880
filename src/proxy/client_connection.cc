#include "proxy/client_connection.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>

#include "observe/log.h"
#include "proxy/wire.h"

namespace sluice::proxy {

namespace beast = boost::beast;
namespace net = boost::asio;

namespace {
// A connection's read buffer grown for a large body is given back after it.
constexpr std::size_t kKeepReadBufferBytes = 64 * 1024;
constexpr std::size_t kReadSize = 8192;
// How long a close_notify may take to go out before the socket closes.
constexpr std::chrono::seconds kCloseNotifyTimeout{1};

// The handshake failed on a plain HTTP request (OpenSSL tells it by its
// first bytes and sends no alert for it): the client gets a plain answer.
bool plain_http(const boost::system::error_code& ec) {
  return ec.category() == net::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST;
}

std::string peer_text(const net::ip::tcp::endpoint& e) {
  return e.address().to_string() + ":" + std::to_string(e.port());
}

const std::string& plain_http_answer() {
  static const std::string answer = [] {
    const std::string body = flowcontrol::openai_error_body(
        "a plain HTTP request was sent to the TLS port; use https://", "invalid_request_error",
        "plain-http-to-tls-port");
    return "HTTP/1.1 400 Bad Request\r\nServer: sluice\r\nContent-Type: application/json\r\n"
           "Connection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return answer;
}
}  // namespace

ClientConnection::ClientConnection(Socket socket, IoThread& thread, ProxyContext& ctx,
                                   ConnectionLimit::Permit permit,
                                   std::shared_ptr<TlsServerContext> tls)
    : client_(std::move(socket), std::move(tls)),
      thread_(thread),
      ctx_(ctx),
      permit_(std::move(permit)),
      registration_(thread_.add(*this)),
      exchange_(*this) {}

ClientConnection::~ClientConnection() {
  thread_.forget_watch(*this);
  thread_.remove(registration_);
}

void ClientConnection::start() {
  if (ctx_.shutting_down.load(std::memory_order_relaxed)) closing_ = true;
  if (client_.tls()) return handshake();
  wait_for_request();
}

void ClientConnection::handshake() {
  if (closing_) return close();
  state_ = State::kHandshake;
  // A client that stalls in the handshake is closed as one that stalls in
  // its request head is.
  client_.expires_after(ctx_.config.server.header_read_timeout);
  client_.async_handshake([self = shared_from_this()](error_code ec) { self->on_handshake(ec); });
}

void ClientConnection::on_handshake(error_code ec) {
  if (state_ == State::kClosed) return;
  using observe::TlsHandshake;
  auto& counts = thread_.stats().tls_handshakes;
  if (!ec) {
    counts[static_cast<std::size_t>(TlsHandshake::kOk)] += 1;
    client_.handshake_done();
    return wait_for_request();
  }
  if (closing_ && ec == net::error::operation_aborted) return close();  // shutdown
  const bool timed_out = client_.timed_out();
  counts[static_cast<std::size_t>(timed_out ? TlsHandshake::kTimeout : TlsHandshake::kFailed)] += 1;
  // A deadline closed the socket: its peer is no longer known.
  error_code no_peer;
  const auto peer = client_.socket().remote_endpoint(no_peer);
  SLUICE_LOG_LIMITED(kInfo, "tls",
                     "handshake" << (no_peer ? "" : " with ") << (no_peer ? "" : peer_text(peer))
                                 << (timed_out ? " timed out (server.headerReadTimeout)"
                                               : " failed: " + ec.message()));
  if (timed_out || !plain_http(ec)) return close();
  // nginx's answer to plain HTTP on its TLS port, in plain HTTP, then the
  // lingering close (the rest of the request is drained, not reset).
  // A fresh socket's send buffer is empty: it goes out whole.
  error_code ignored;
  wire::try_send(client_.socket(), net::buffer(plain_http_answer()), ignored);
  linger();
}

void ClientConnection::begin_close() {
  closing_ = true;
  if (state_ == State::kIdle || state_ == State::kLingering || state_ == State::kHandshake) {
    error_code ec;
    client_.socket().cancel(ec);
  }
}

void ClientConnection::force_close() {
  closing_ = true;
  client_.close();
  exchange_.force_close();
}

void ClientConnection::wait_for_request() {
  if (closing_) return close_gracefully();
  state_ = State::kIdle;
  // The next request is read under the keep-alive deadline from here.
  stop_watching();
  exchange_.reset();
  if (buffer_.size() == 0 && buffer_.capacity() > kKeepReadBufferBytes)
    buffer_ = beast::flat_buffer();  // a large body's buffer is not kept idle
  if (buffer_.size() > 0) {
    state_ = State::kBusy;
    return exchange_.parse_request();  // pipelined bytes
  }
  // Waiting for a request to start is governed by the keep-alive idle timeout
  // (or the header timeout on a fresh connection).
  client_.expires_after(first_request_ ? ctx_.config.server.header_read_timeout
                                       : ctx_.config.server.keep_alive_idle_timeout);
  read_client(kReadSize);
}

void ClientConnection::read_client(std::size_t size) {
  client_.async_read_some(
      buffer_.prepare(size),
      beast::bind_front_handler(&ClientConnection::on_client_read, shared_from_this()));
}

void ClientConnection::on_client_read(error_code ec, std::size_t n) {
  // Idle timeout, client gone, or shutdown cancel; a request cut short by a
  // timeout or a close gets no answer (there is no one to read it). An idle
  // connection that shutdown cancelled is closed gracefully.
  if (ec) return closing_ && ec == net::error::operation_aborted ? close_gracefully() : close();
  buffer_.commit(n);
  state_ = State::kBusy;
  exchange_.parse_request();
}

void ClientConnection::arm_deferred_watch() {
  if (state_ != State::kBusy) return;
  using Phase = Exchange::Phase;
  const auto phase = exchange_.phase();
  if (phase == Phase::kQueued || phase == Phase::kCalling || phase == Phase::kRelaying ||
      phase == Phase::kEvicted)
    watch_client();
}

void ClientConnection::watch_client() {
  if (watching_) return;
  watching_ = true;
  // Readiness, not a read: no speculative recv per request. When it fires,
  // a peek tells a close from the bytes of a next request.
  client_.socket().async_wait(net::socket_base::wait_read,
                              [self = shared_from_this(), gen = ++watch_generation_](
                                  error_code ec) { self->on_watch(ec, gen); });
}

// The client closed (its FIN is seen even behind pipelined bytes still
// unread, which a peek would return instead) or reset the connection.
bool ClientConnection::client_gone() {
  pollfd p{client_.socket().native_handle(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void ClientConnection::stop_watching() {
  thread_.forget_watch(*this);
  if (!watching_) return;
  watching_ = false;
  ++watch_generation_;  // the cancelled wait's handler will see it is stale
  error_code ignored;
  client_.socket().cancel(ignored);
}

void ClientConnection::on_watch(error_code ec, std::uint64_t generation) {
  if (generation != watch_generation_) return;  // cancelled by stop_watching()
  watching_ = false;
  if (state_ == State::kClosed) return;
  if (!ec) {
    char byte;
    const ssize_t r = ::recv(client_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) {
      // Bytes of a next (pipelined) request: read when this one is done —
      // unless the client closed behind them while this one is still
      // queued or in flight (then it is gone, as below).
      if (state_ == State::kIdle) return read_client(kReadSize);
      if (!client_gone()) {
        watch_saw_bytes_ = true;
        return;
      }
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return watch_client();
    }
  }
  if (state_ == State::kBusy && exchange_.phase() == Exchange::Phase::kQueued)
    return exchange_.cancel();  // the EvictedContextCancelled decision closes the connection
  // The client left mid-proxy (or while idle): stop the upstream so the
  // generation ends.
  close();
}

void ClientConnection::linger() {
  state_ = State::kLingering;
  // The refused request's body is not needed (nor charged) while draining.
  exchange_.release_request_body();
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.expires_after(std::chrono::seconds(2));  // for the whole drain
  drain();
}

// On the TCP stream even on a TLS connection: the answer is out, the bytes
// read here are thrown away.
void ClientConnection::drain() {
  buffer_.clear();
  client_.tcp().async_read_some(buffer_.prepare(kReadSize),
                                [self = shared_from_this()](error_code ec, std::size_t) {
                                  if (ec) return self->close();  // EOF, timeout or shutdown
                                  self->drain();
                                });
}

void ClientConnection::close() {
  if (state_ == State::kClosed) return;
  // A request still open when the connection ends: the client left (or a
  // shutdown deadline closed it). nginx's 499.
  exchange_.on_close();
  state_ = State::kClosed;
  thread_.forget_watch(*this);
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.close();
  exchange_.release_after_close();
}

void ClientConnection::close_gracefully() {
  if (state_ == State::kClosed) return;
  if (!client_.can_close_notify()) return close();
  exchange_.on_close();
  state_ = State::kClosed;
  stop_watching();
  exchange_.release_after_close();
  client_.expires_after(kCloseNotifyTimeout);
  client_.async_close_notify([self = shared_from_this()](error_code) {
    error_code ec;
    self->client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
    self->client_.close();
  });
}

}  // namespace sluice::proxy
