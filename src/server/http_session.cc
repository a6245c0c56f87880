#include "server/http_session.h"

#include <boost/asio/write.hpp>

#include <cstdio>

#include "scheduling/least_in_flight.h"
#include "server/log.h"
#include "server/openai_request.h"

namespace sluice::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using flowcontrol::client_error;

namespace {

constexpr std::size_t kFirstReadSize = 4096;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// Request headers that steer sluice and must not reach the model server.
constexpr std::string_view kControlHeaders[] = {
    "x-gateway-inference-fairness-id",
    "x-gateway-inference-objective",
    "x-gateway-inference-ttl-ms",
    "x-slo-ttft-ms",
};

// Hop-by-hop headers (RFC 9110 §7.6.1) plus Expect, which sluice answers itself.
constexpr http::field kHopByHop[] = {
    http::field::connection, http::field::keep_alive,  http::field::proxy_connection,
    http::field::te,         http::field::trailer,     http::field::upgrade,
    http::field::expect,     http::field::proxy_authorization,
};

bool iequals(std::string_view a, std::string_view b) { return beast::iequals(a, b); }

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, Worker& worker, ProxyContext& ctx)
    : client_(std::move(socket)), worker_(worker), ctx_(ctx) {
  registration_ = worker_.sessions.insert(worker_.sessions.end(), this);
}

HttpSession::~HttpSession() { worker_.sessions.erase(registration_); }

void HttpSession::start() {
  if (ctx_.shutting_down.load(std::memory_order_relaxed)) closing_ = true;
  wait_for_request();
}

void HttpSession::begin_close() {
  closing_ = true;
  if (state_ == State::kIdle || state_ == State::kLingering) {
    error_code ec;
    client_.socket().cancel(ec);
  }
}

void HttpSession::force_close() {
  closing_ = true;
  error_code ec;
  client_.socket().close(ec);
  if (upstream_) upstream_->stream.socket().close(ec);
}

// ---------------------------------------------------------------- request side

void HttpSession::wait_for_request() {
  if (closing_) return close();
  state_ = State::kIdle;
  if (client_buffer_.size() > 0) return read_header();  // pipelined bytes
  // Waiting for a request to start is governed by the keep-alive idle timeout
  // (or the header timeout on a fresh connection); once bytes arrive, the
  // header timeout runs from there.
  client_.expires_after(first_request_ ? ctx_.config.server.header_read_timeout
                                       : ctx_.config.server.keep_alive_idle_timeout);
  client_.async_read_some(client_buffer_.prepare(kFirstReadSize),
                          beast::bind_front_handler(&HttpSession::on_first_bytes, shared_from_this()));
}

void HttpSession::on_first_bytes(error_code ec, std::size_t n) {
  if (ec) return close();  // idle timeout, client closed, or shutdown cancel
  client_buffer_.commit(n);
  read_header();
}

void HttpSession::read_header() {
  state_ = State::kReadingRequest;
  request_id_.clear();
  route_ = Route::kUnknown;
  request_parser_.emplace();
  request_parser_->header_limit(ctx_.config.server.max_header_bytes);
  request_parser_->body_limit(ctx_.config.server.max_body_bytes);
  client_.expires_after(ctx_.config.server.header_read_timeout);
  http::async_read_header(client_, client_buffer_, *request_parser_,
                          beast::bind_front_handler(&HttpSession::on_header, shared_from_this()));
}

void HttpSession::on_header(error_code ec, std::size_t) {
  keep_alive_ = false;  // until a full request is read, errors close the connection
  if (ec == http::error::header_limit)
    return answer(client_error(431, "headers-too-large", "request headers exceed the limit"));
  if (ec == http::error::body_limit)  // a Content-Length over the limit
    return answer(client_error(413, "body-too-large", "request body exceeds the limit"));
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset)
    return close();
  if (ec) return answer(client_error(400, "bad-request", "malformed HTTP request: " + ec.message()));

  auto& req = request_parser_->get();
  client_version_ = req.version();
  if (auto len = request_parser_->content_length();
      len && *len > ctx_.config.server.max_body_bytes) {
    return answer(client_error(413, "body-too-large", "request body exceeds the limit"));
  }
  if (iequals(req[http::field::expect], "100-continue")) {
    client_.expires_after(ctx_.config.server.client_write_timeout);
    net::async_write(client_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void HttpSession::read_body() {
  client_.expires_after(ctx_.config.server.body_read_timeout);
  http::async_read(client_, client_buffer_, *request_parser_,
                   beast::bind_front_handler(&HttpSession::on_request, shared_from_this()));
}

void HttpSession::on_request(error_code ec, std::size_t) {
  if (ec == http::error::body_limit)
    return answer(client_error(413, "body-too-large", "request body exceeds the limit"));
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == http::error::partial_message ||
      ec == net::error::connection_reset)
    return close();
  if (ec) return answer(client_error(400, "bad-request", "malformed HTTP request: " + ec.message()));
  handle_request();
}

void HttpSession::handle_request() {
  auto& req = request_parser_->get();
  keep_alive_ = req.keep_alive() && !closing_;
  route_ = classify_target(req.target());

  auto id = req["x-request-id"];
  if (!id.empty() && id.size() <= 128) {
    request_id_.assign(id.data(), id.size());
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx",
                  static_cast<unsigned long long>(worker_.id_prefix),
                  static_cast<unsigned long long>(++worker_.request_seq));
    request_id_.assign(buf);
  }

  if (route_ == Route::kUnknown)
    return answer(client_error(404, "not-found", "no such path: " + std::string(req.target())));
  const bool inference = is_inference(route_);
  const auto method = req.method();
  if ((inference && method != http::verb::post) || (!inference && method != http::verb::get)) {
    auto a = client_error(405, "method-not-allowed",
                          std::string("method ") + std::string(req.method_string()) +
                              " is not allowed on " + std::string(req.target()));
    return answer(a);
  }
  if (inference) {
    if (!is_json_content_type(req[http::field::content_type]))
      return answer(client_error(400, "unsupported-content-type",
                                 "Content-Type must be application/json"));
    auto parsed = parse_openai_request(route_, req.body());
    if (!parsed.ok()) return answer(client_error(400, parsed.error_code, parsed.error_message));
  }

  // Rewrite the request for the model server, in place.
  for (auto name : kControlHeaders) req.erase(name);
  for (auto f : kHopByHop) req.erase(f);
  req.set("x-request-id", request_id_);
  req.version(11);
  req.keep_alive(true);
  req.prepare_payload();

  tried_.assign(ctx_.endpoints.size(), false);
  retried_ = false;
  try_next_endpoint();
}

// ---------------------------------------------------------------- upstream side

void HttpSession::try_next_endpoint() {
  int ep = scheduling::pick_least_in_flight(ctx_.endpoints, tried_, datalayer::Clock::now(),
                                            worker_.rotation);
  if (ep < 0) {
    return answer(flowcontrol::answer_for(QueueOutcome::kRejectedNoEndpoints));
  }
  dispatch_to(ep);
}

void HttpSession::dispatch_to(int endpoint) {
  state_ = State::kProxying;
  endpoint_ = endpoint;
  tried_[endpoint] = true;
  permit_ = datalayer::InFlightPermit(&ctx_.endpoints.at(endpoint));
  request_parser_->get().set(http::field::host, ctx_.endpoints.at(endpoint).config.address);
  upstream_ = worker_.pool.take(endpoint);
  if (upstream_) {
    upstream_reused_ = true;
    return write_upstream();
  }
  connect_upstream();
}

void HttpSession::connect_upstream() {
  upstream_reused_ = false;
  upstream_ = std::make_unique<UpstreamConnection>(client_.get_executor(), endpoint_);
  upstream_->stream.expires_after(ctx_.config.server.upstream_connect_timeout);
  upstream_->stream.async_connect(
      ctx_.upstream_addresses[endpoint_],
      beast::bind_front_handler(&HttpSession::on_connect, shared_from_this()));
}

void HttpSession::on_connect(error_code ec) {
  auto& ep = ctx_.endpoints.at(endpoint_);
  if (ec) {
    SLUICE_LOG(kWarn, "upstream", "endpoint " << ep.config.address << " unreachable ("
                                              << ec.message() << "); marked down");
    ep.mark_down(datalayer::Clock::now(), ctx_.config.server.endpoint_down_backoff);
    upstream_.reset();
    permit_.release();
    if (closing_ && ctx_.shutting_down.load()) {
      return answer(flowcontrol::answer_for(QueueOutcome::kRejectedOther, "gateway shutting down"));
    }
    return try_next_endpoint();
  }
  error_code ignored;
  upstream_->stream.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  write_upstream();
}

void HttpSession::write_upstream() {
  response_parser_.reset();
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  http::async_write(upstream_->stream, request_parser_->get(),
                    beast::bind_front_handler(&HttpSession::on_upstream_written, shared_from_this()));
}

void HttpSession::on_upstream_written(error_code ec, std::size_t) {
  if (ec) return upstream_failed_before_response(ec, "writing the request");
  response_parser_.emplace();
  response_parser_->body_limit(boost::none);  // relayed, never buffered whole
  response_parser_->header_limit(64 * 1024);
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  http::async_read_header(
      upstream_->stream, upstream_->buffer, *response_parser_,
      beast::bind_front_handler(&HttpSession::on_upstream_header, shared_from_this()));
}

void HttpSession::upstream_failed_before_response(error_code ec, const char* stage) {
  const bool got_bytes = response_parser_ && response_parser_->got_some();
  auto& ep = ctx_.endpoints.at(endpoint_);
  upstream_.reset();  // never pooled after a failure
  // A kept-alive connection may have been closed by the endpoint while idle in
  // the pool: retry once on a fresh connection, but only if not a single
  // response byte came back (so the endpoint cannot have started answering).
  if (upstream_reused_ && !retried_ && !got_bytes && ec != beast::error::timeout) {
    retried_ = true;
    SLUICE_LOG(kDebug, "upstream", "reused connection to " << ep.config.address << " failed while "
                                                           << stage << " (" << ec.message()
                                                           << "); retrying on a fresh connection");
    return connect_upstream();
  }
  permit_.release();
  SLUICE_LOG(kWarn, "upstream", "endpoint " << ep.config.address << " failed while " << stage << ": "
                                            << ec.message());
  flowcontrol::ErrorAnswer a;
  if (ec == beast::error::timeout) {
    a = client_error(504, "upstream-timeout", "model server did not answer in time");
  } else {
    a = client_error(502, "upstream-error",
                     std::string("model server failed while ") + stage + ": " + ec.message());
  }
  a.close_connection = false;
  answer(a);
}

void HttpSession::on_upstream_header(error_code ec, std::size_t) {
  if (ec) return upstream_failed_before_response(ec, "reading the response");
  auto& res = response_parser_->get();
  upstream_keep_alive_ = res.keep_alive();
  response_is_sse_ =
      res[http::field::content_type].substr(0, 17) == "text/event-stream";

  // Turn the upstream header into the client's header, in place.
  for (auto f : kHopByHop) res.erase(f);
  res.set("x-gateway-destination-endpoint-served", ctx_.endpoints.at(endpoint_).config.address);
  res.set("x-request-id", request_id_);
  const bool delimited_by_close =
      !res.chunked() && !response_parser_->content_length() && !response_parser_->is_done();
  if (client_version_ < 11) {
    res.chunked(false);
    if (delimited_by_close) keep_alive_ = false;
  } else if (delimited_by_close) {
    res.chunked(true);  // keep the client connection reusable
  }
  res.version(client_version_);
  res.keep_alive(keep_alive_ && !closing_);

  auto& body = res.body();
  body.data = nullptr;
  body.size = 0;
  body.more = !response_parser_->is_done();
  serializer_.emplace(res);
  client_.expires_after(ctx_.config.server.client_write_timeout);
  if (response_parser_->is_done()) {
    return http::async_write(
        client_, *serializer_,
        beast::bind_front_handler(&HttpSession::on_relay_written, shared_from_this()));
  }
  // Headers go out at once, so a streaming client sees the response start
  // before the first token.
  http::async_write_header(
      client_, *serializer_,
      beast::bind_front_handler(&HttpSession::on_client_header_written, shared_from_this()));
}

// ---------------------------------------------------------------- relay

void HttpSession::on_client_header_written(error_code ec, std::size_t) {
  if (ec) {
    upstream_.reset();  // client gone: close the upstream so generation stops
    permit_.release();
    return close();
  }
  relay_read();
}

void HttpSession::relay_read() {
  auto& body = response_parser_->get().body();
  body.data = relay_buffer_.data();
  body.size = relay_buffer_.size();
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  http::async_read_some(upstream_->stream, upstream_->buffer, *response_parser_,
                        beast::bind_front_handler(&HttpSession::on_relay_read, shared_from_this()));
}

void HttpSession::on_relay_read(error_code ec, std::size_t) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec && !response_parser_->is_done()) return upstream_failed_mid_response(ec);
  auto& body = response_parser_->get().body();
  const std::size_t filled = relay_buffer_.size() - body.size;
  // A zero-length buffer must be "no data" for the serializer: a zero-size
  // chunk would end a chunked body early.
  body.data = filled ? relay_buffer_.data() : nullptr;
  body.size = filled;
  body.more = !response_parser_->is_done();
  client_.expires_after(ctx_.config.server.client_write_timeout);
  http::async_write(client_, *serializer_,
                    beast::bind_front_handler(&HttpSession::on_relay_written, shared_from_this()));
}

void HttpSession::on_relay_written(error_code ec, std::size_t) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    SLUICE_LOG(kDebug, "session", "client write failed (" << ec.message()
                                                          << "); closing upstream connection");
    upstream_.reset();  // generation stops when the endpoint sees the close
    permit_.release();
    return close();
  }
  if (response_parser_->is_done() && serializer_->is_done()) return finish_response();
  relay_read();
}

void HttpSession::upstream_failed_mid_response(error_code ec) {
  SLUICE_LOG(kWarn, "upstream", "endpoint " << ctx_.endpoints.at(endpoint_).config.address
                                            << " failed mid-response: " << ec.message());
  upstream_.reset();
  permit_.release();
  keep_alive_ = false;
  if (!response_is_sse_) return close();
  // Tell an SSE client why its stream ends, then close without the final
  // chunk, so the transfer is visibly incomplete to any HTTP client.
  error_event_ = "data: " +
                 flowcontrol::openai_error_body("model server failed mid-stream: " + ec.message(),
                                                "server_error", "upstream-error") +
                 "\n\n";
  auto& body = response_parser_->get().body();
  body.data = error_event_.data();
  body.size = error_event_.size();
  body.more = true;
  client_.expires_after(ctx_.config.server.client_write_timeout);
  http::async_write(client_, *serializer_,
                    [self = shared_from_this()](error_code, std::size_t) { self->close(); });
}

void HttpSession::finish_response() {
  permit_.release();
  if (upstream_) {
    upstream_->requests += 1;
    if (upstream_keep_alive_) worker_.pool.give_back(std::move(upstream_));
    upstream_.reset();
  }
  serializer_.reset();
  response_parser_.reset();
  request_parser_.reset();
  first_request_ = false;
  if (!keep_alive_) return close();
  wait_for_request();
}

// ---------------------------------------------------------------- own answers

void HttpSession::answer(const flowcontrol::ErrorAnswer& a) {
  state_ = State::kAnswering;
  if (a.close_connection) keep_alive_ = false;
  answer_.emplace(static_cast<http::status>(a.status), client_version_);
  auto& res = *answer_;
  res.set(http::field::server, "sluice");
  res.set(http::field::content_type, "application/json");
  if (!a.reason.empty()) res.set("x-gateway-inference-dropped-reason", a.reason);
  if (a.retry_after_seconds > 0) res.set(http::field::retry_after, std::to_string(a.retry_after_seconds));
  if (!request_id_.empty()) res.set("x-request-id", request_id_);
  if (a.status == 405) res.set(http::field::allow, is_inference(route_) ? "POST" : "GET");
  res.body() = a.body;
  res.keep_alive(keep_alive_ && !closing_);
  res.prepare_payload();
  client_.expires_after(ctx_.config.server.client_write_timeout);
  http::async_write(client_, res,
                    beast::bind_front_handler(&HttpSession::on_answer_written, shared_from_this()));
}

void HttpSession::on_answer_written(error_code ec, std::size_t) {
  const bool keep = !ec && answer_->keep_alive();
  if (!ec && !keep && state_ == State::kAnswering && request_parser_ && !request_parser_->is_done()) {
    // The client may still be sending a body we refused (413) or headers we
    // could not take (431). Closing with unread input would send a reset that
    // can destroy our answer before the client reads it, so stop sending and
    // drain for a short while first (nginx's lingering close).
    answer_.reset();
    return linger();
  }
  answer_.reset();
  request_parser_.reset();
  request_id_.clear();
  first_request_ = false;
  if (!keep) return close();
  wait_for_request();
}

void HttpSession::linger() {
  state_ = State::kLingering;
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.expires_after(std::chrono::seconds(2));
  client_buffer_.clear();
  client_.async_read_some(
      client_buffer_.prepare(kFirstReadSize), [self = shared_from_this()](error_code ec, std::size_t) {
        if (ec) return self->close();
        self->client_buffer_.clear();
        self->linger_more();
      });
}

void HttpSession::linger_more() {
  client_.async_read_some(
      client_buffer_.prepare(kFirstReadSize), [self = shared_from_this()](error_code ec, std::size_t) {
        if (ec) return self->close();
        self->client_buffer_.clear();
        self->linger_more();
      });
}

void HttpSession::close() {
  state_ = State::kClosed;
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.socket().close(ec);
  upstream_.reset();
  permit_.release();
}

}  // namespace sluice::server
