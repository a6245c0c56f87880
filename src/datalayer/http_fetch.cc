#include "datalayer/http_fetch.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "datalayer/upstream_tls.h"

namespace sluice::datalayer {

namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

// ---- URLs ----

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (to_lower(s[i]) != prefix[i]) return false;
  return true;
}

bool parse_port(std::string_view s, std::uint16_t& port) {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) {
    if (!is_digit(c)) return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

// A DNS name (letters, digits, '-', '_', dots between labels of 1 to 63
// characters) or an IPv4 address in dotted-quad form. Digits and dots only
// but not a dotted quad ("127.1", "1.2.3.4.5") is refused: the resolver
// would read some of those as addresses the certificate check would not.
bool valid_host(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  error_code ec;
  net::ip::make_address_v4(std::string(h), ec);
  if (!ec) return true;
  bool numeric = true;
  std::size_t label = 0;
  for (char c : h) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_') return false;
    if (!is_digit(c)) numeric = false;
    if (++label > 63) return false;
  }
  return label > 0 && !numeric;
}

// "[v6]" or "[v6]:port" into `out` (without the brackets).
bool parse_ipv6_authority(std::string_view authority, Url& out) {
  std::size_t close = authority.find(']');
  if (close == std::string_view::npos) return false;
  std::string inside(authority.substr(1, close - 1));
  if (inside.find('%') != std::string::npos) return false;  // no zone ids
  error_code ec;
  auto address = net::ip::make_address_v6(inside, ec);
  if (ec) return false;
  std::string_view rest = authority.substr(close + 1);
  if (!rest.empty() && (rest[0] != ':' || !parse_port(rest.substr(1), out.port))) return false;
  out.host = address.to_string();
  return true;
}

bool parse_authority(std::string_view authority, Url& out) {
  if (authority.empty() || authority.find('@') != std::string_view::npos) return false;
  if (authority[0] == '[') return parse_ipv6_authority(authority, out);
  std::size_t colon = authority.find(':');
  std::string_view host = authority.substr(0, colon);
  if (colon != std::string_view::npos && !parse_port(authority.substr(colon + 1), out.port))
    return false;
  if (!valid_host(host)) return false;
  out.host.clear();
  for (char c : host) out.host.push_back(to_lower(c));
  return true;
}

// ---- the fetch ----

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// OpenSSL's first queued error as text, its reason alone when it has one
// ("No such file or directory", "no certificate or crl found"); the queue
// is cleared.
std::string openssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  if (ERR_SYSTEM_ERROR(e)) return std::generic_category().message(ERR_GET_REASON(e));
  if (const char* reason = ERR_reason_error_string(e)) return reason;
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

// A header value fit for a log line: printable ASCII, at most 256 bytes.
std::string printable(std::string_view value) {
  std::string out;
  for (char c : value.substr(0, 256)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

class Fetch : public std::enable_shared_from_this<Fetch> {
 public:
  Fetch(net::io_context& ioc, Url url, const FetchOptions& options,
        std::function<void(FetchResult)> done)
      : ioc_(ioc),
        url_(std::move(url)),
        options_(options),
        done_(std::move(done)),
        timer_(ioc),
        resolver_(ioc),
        socket_(ioc) {}

  void start();

 private:
  // `f(stream)` with the stream the HTTP exchange runs on.
  template <class F>
  void with_stream(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(socket_);
  }
  tcp::socket& socket() { return tls_ ? tls_->next_layer() : socket_; }
  std::string host_port() const;
  bool setup_tls(std::string& error);
  bool setup_upstream_tls(std::string& error);
  void resolve();
  void connect();
  void handshake();
  void send();
  void receive();
  void on_response(const error_code& ec);
  std::string read_error(const error_code& ec) const;
  void fail(std::string why);
  void finish(FetchResult result);

  net::io_context& ioc_;
  Url url_;
  FetchOptions options_;
  std::function<void(FetchResult)> done_;
  net::steady_timer timer_;
  tcp::resolver resolver_;
  tcp::socket socket_;                           // http
  std::optional<ssl::stream<tcp::socket>> tls_;  // https
  std::vector<tcp::endpoint> endpoints_;
  http::request<http::empty_body> request_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  const char* phase_ = "starting";
  bool finished_ = false;
};

void Fetch::start() {
  timer_.expires_after(options_.timeout);
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || self->finished_) return;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(self->options_.timeout);
    self->fail("timed out after " + std::to_string(ms.count()) + " ms (" + self->phase_ + ")");
  });
  std::string error;
  if (url_.https && !setup_tls(error)) return fail(std::move(error));
  request_.method(http::verb::get);
  request_.target(url_.target);
  request_.version(11);
  request_.set(http::field::host, host_port());
  request_.set(http::field::user_agent, "sluice");
  request_.set(http::field::accept, "application/json");
  request_.set(http::field::connection, "close");
  if (!options_.authorization.empty())
    request_.set(http::field::authorization, options_.authorization);
  resolve();
}

std::string Fetch::host_port() const {
  bool v6 = url_.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + url_.host + "]" : url_.host;
  if (url_.port == (url_.https ? 443 : 80)) return host;
  return host + ":" + std::to_string(url_.port);
}

// A client context: TLS 1.2 at least, the peer verified against the CA
// file or the system's paths (reads the CA file: a local file, once per
// fetch). Null, and `error`, if it cannot be made.
std::unique_ptr<SSL_CTX, SslCtxFree> client_context(const std::string& ca_file,
                                                    std::string& error) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    error = "TLS: " + openssl_error();
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) != 1
                      : SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1) {
    error = (ca_file.empty() ? "TLS: the system's CA paths" : "ca_file " + ca_file) + ": " +
            openssl_error();
    return nullptr;
  }
  return ctx;
}

// The session's checks: for a name, SNI and the name against the
// certificate's DNS names; for an address, the address against its IP
// names (no SNI: it carries names only).
bool check_peer_name(SSL* ssl, const std::string& host) {
  error_code ec;
  net::ip::make_address(host, ec);
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, host.c_str()) == 1 && SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
}

bool Fetch::setup_tls(std::string& error) {
  if (options_.tls) return setup_upstream_tls(error);
  auto ctx = client_context(options_.ca_file, error);
  if (!ctx) return false;
  SSL* ssl = SSL_new(ctx.get());  // holds its own reference to the context
  if (!ssl) {
    error = "TLS: " + openssl_error();
    return false;
  }
  tls_.emplace(ioc_, ssl);  // owns `ssl` from here
  if (!check_peer_name(ssl, url_.host)) {
    error = "TLS: cannot check the peer's name " + url_.host + ": " + openssl_error();
    return false;
  }
  return true;
}

// A model server's setting: its context (options_ keeps it alive longer
// than the session), checked as the proxied requests check it.
bool Fetch::setup_upstream_tls(std::string& error) {
  SSL* ssl = SSL_new(options_.tls->context->native_handle());
  if (!ssl) {
    error = "TLS: " + openssl_error();
    return false;
  }
  tls_.emplace(ioc_, ssl);  // owns `ssl` from here
  if (!prepare_upstream_session(ssl, *options_.tls, options_.tls->name_for(url_.host))) {
    error = "TLS: cannot check the peer's name " + options_.tls->name_for(url_.host) + ": " +
            openssl_error();
    return false;
  }
  return true;
}

void Fetch::resolve() {
  error_code ec;
  auto address = net::ip::make_address(url_.host, ec);
  if (!ec) {
    endpoints_.emplace_back(address, url_.port);
    return connect();
  }
  phase_ = "resolving";
  // RFC 6761 6.4: a name under "invalid" gets a negative answer at once,
  // never a query (getaddrinfo would ask the name servers).
  // Names are compared without case (RFC 4343).
  const std::string_view h = url_.host;
  if (boost::beast::iequals(h, "invalid") ||
      (h.size() > 8 && boost::beast::iequals(h.substr(h.size() - 8), ".invalid")))
    return fail("resolving " + url_.host + ": no such name (.invalid is never looked up)");
  resolver_.async_resolve(
      url_.host, std::to_string(url_.port), tcp::resolver::numeric_service,
      [self = shared_from_this()](const error_code& ec, tcp::resolver::results_type results) {
        if (self->finished_) return;
        if (ec) return self->fail("resolving " + self->url_.host + ": " + ec.message());
        for (const auto& r : results) self->endpoints_.push_back(r.endpoint());
        self->connect();
      });
}

void Fetch::connect() {
  phase_ = "connecting";
  net::async_connect(
      socket(), endpoints_,
      [self = shared_from_this()](const error_code& ec, const tcp::endpoint&) {
        if (self->finished_) return;
        if (ec) return self->fail("connecting to " + self->host_port() + ": " + ec.message());
        if (self->tls_) return self->handshake();
        self->send();
      });
}

void Fetch::handshake() {
  phase_ = "TLS handshake";
  tls_->async_handshake(
      ssl::stream_base::client, [self = shared_from_this()](const error_code& ec) {
        if (self->finished_) return;
        if (!ec) return self->send();
        long verify = SSL_get_verify_result(self->tls_->native_handle());
        if (verify != X509_V_OK)
          return self->fail(std::string("TLS: certificate verification failed: ") +
                            X509_verify_cert_error_string(verify));
        self->fail("TLS handshake with " + self->host_port() + ": " + ec.message());
      });
}

void Fetch::send() {
  phase_ = "sending the request";
  with_stream([this](auto& stream) {
    http::async_write(stream, request_,
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        if (self->finished_) return;
                        if (ec) return self->fail("sending the request: " + ec.message());
                        self->receive();
                      });
  });
}

// The parser refuses a head over max_header_bytes and a body over
// max_body_bytes, an announced Content-Length over it before reading (or
// reserving) any of it; the buffer holds at most a head and a read.
void Fetch::receive() {
  phase_ = "reading the response";
  constexpr std::size_t kU32 = std::numeric_limits<std::uint32_t>::max();
  parser_.header_limit(static_cast<std::uint32_t>(std::min(options_.max_header_bytes, kU32)));
  parser_.body_limit(options_.max_body_bytes);
  constexpr std::size_t kRead = 64u << 10;  // Beast's largest single read
  buffer_.max_size(std::min(options_.max_header_bytes, std::size_t(-1) - kRead) + kRead);
  with_stream([this](auto& stream) {
    http::async_read(stream, buffer_, parser_,
                     [self = shared_from_this()](const error_code& ec, std::size_t) {
                       if (self->finished_) return;
                       self->on_response(ec);
                     });
  });
}

void Fetch::on_response(const error_code& ec) {
  FetchResult result;
  if (parser_.is_header_done()) result.status = parser_.get().result_int();
  if (ec) {
    result.error = read_error(ec);
    return finish(std::move(result));
  }
  auto& response = parser_.get();
  if (result.status == 200) {
    result.ok = true;
    result.body = std::move(response.body());
  } else if (result.status / 100 == 3) {
    auto location = response.find(http::field::location);
    result.error = "redirect (HTTP " + std::to_string(result.status) + ") not followed";
    if (location != response.end()) result.error += ": Location " + printable(location->value());
  } else {
    result.error = "HTTP " + std::to_string(result.status);
  }
  finish(std::move(result));
}

std::string Fetch::read_error(const error_code& ec) const {
  if (ec == http::error::body_limit)
    return "response body too large (over " + std::to_string(options_.max_body_bytes) + " bytes)";
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return "response header too large (over " + std::to_string(options_.max_header_bytes) +
           " bytes)";
  if (ec == http::error::end_of_stream) return "connection closed before a response";
  if (ec == http::error::partial_message) return "connection closed mid-response";
  if (ec == ssl::error::stream_truncated)
    return "TLS connection closed without close_notify mid-response";
  if (ec.category() == make_error_code(http::error::end_of_stream).category())
    return "malformed response: " + ec.message();
  return "reading the response: " + ec.message();
}

void Fetch::fail(std::string why) {
  FetchResult result;
  result.error = std::move(why);
  finish(std::move(result));
}

// Ends the fetch once: stops the timer and the resolver, closes the socket
// (whatever is pending ends with operation_aborted), then tells the caller.
void Fetch::finish(FetchResult result) {
  if (finished_) return;
  finished_ = true;
  timer_.cancel();
  resolver_.cancel();
  error_code ignored;
  socket().close(ignored);
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(result));
}

}  // namespace

bool parse_url(std::string_view url, Url& out) {
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return false;  // spaces, control and non-ASCII bytes
  if (url.find('#') != std::string_view::npos) return false;
  Url parsed;
  if (starts_with_nocase(url, "https://")) {
    parsed.https = true;
    url.remove_prefix(8);
  } else if (starts_with_nocase(url, "http://")) {
    url.remove_prefix(7);
  } else {
    return false;
  }
  std::size_t end = url.find_first_of("/?");
  parsed.port = parsed.https ? 443 : 80;
  if (!parse_authority(url.substr(0, end), parsed)) return false;
  if (end != std::string_view::npos) {
    std::string_view rest = url.substr(end);
    parsed.target = rest[0] == '/' ? std::string(rest) : "/" + std::string(rest);
  }
  out = std::move(parsed);
  return true;
}

void http_get(boost::asio::io_context& ioc, const std::string& url, const FetchOptions& options,
              std::function<void(FetchResult)> done) {
  Url parsed;
  if (!parse_url(url, parsed)) {
    FetchResult result;
    result.error = "not a valid http:// or https:// URL";
    net::post(ioc, [done = std::move(done), result = std::move(result)]() mutable {
      if (done) done(std::move(result));
    });
    return;
  }
  auto fetch = std::make_shared<Fetch>(ioc, std::move(parsed), options, std::move(done));
  net::post(ioc, [fetch] { fetch->start(); });
}

}  // namespace sluice::datalayer
