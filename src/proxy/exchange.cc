#include "proxy/exchange.h"

#include <boost/asio/write.hpp>

#include "proxy/client_connection.h"

namespace sluice::proxy {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using flowcontrol::client_error;

namespace {

constexpr std::size_t kReadSize = 8192;
// Past the head of a request whose length is known, what remains of the body
// is read in reads of up to this much: a 640 KB prompt in 8 KB reads was 80
// trips through the event loop and as many recvmsg calls.
constexpr std::size_t kBodyReadSize = 256 * 1024;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

Exchange::Exchange(ClientConnection& conn)
    : conn_(conn), thread_(conn.thread_), ctx_(conn.ctx_), body_lease_(ctx_.body_budget.lease()) {}

std::shared_ptr<ClientConnection> Exchange::guard() { return conn_.shared_from_this(); }

bool Exchange::closed() const { return conn_.state_ == ClientConnection::State::kClosed; }

bool Exchange::in(Phase p) const {
  return conn_.state_ == ClientConnection::State::kBusy && phase_ == p;
}

void Exchange::reset() {
  request_id_.clear();
  route_ = protocol::Route::kUnknown;
  request_parser_.reset();
  // The last request's body is not kept (nor charged) while the connection
  // waits for the next one.
  release_request_body();
}

// ---------------------------------------------------------------- reading

void Exchange::begin_parser() {
  phase_ = Phase::kReading;
  // A spare large buffer of the thread's, if the connection holds none:
  // a large body then reuses memory already mapped (release_request_body).
  if (request_.body.capacity() <= BodyBudget::kAllowance) thread_.take_spare_body(request_.body);
  request_parser_.emplace(request_);
  request_parser_->header_limit(ctx_.config.server.max_header_bytes);
  request_parser_->body_limit(ctx_.config.server.max_body_bytes);
  request_parser_->eager(true);
  header_deadline_armed_ = false;
  body_deadline_armed_ = false;
  continue_sent_ = false;
}

// Feeds what is buffered to the request parser. A request that arrived whole
// (the usual case) is handled without another trip through the event loop;
// otherwise read more under the header or body deadline.
void Exchange::parse_request() {
  if (!request_parser_) begin_parser();
  auto& p = *request_parser_;
  error_code ec;
  while (conn_.buffer_.size() > 0 && !p.is_done()) {
    std::size_t used = p.put(conn_.buffer_.data(), ec);
    conn_.buffer_.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
  }
  keep_alive_ = false;  // until a full request is read, errors close the connection
  if (ec == http::error::header_limit)
    return answer(client_error(431, "headers-too-large", "request headers exceed the limit"));
  if (ec == http::error::body_limit)
    return answer(client_error(413, "body-too-large", "request body exceeds the limit"));
  if (ec)
    return answer(client_error(400, "bad-request", "malformed HTTP request: " + ec.message()));
  if (p.is_header_done() && !rec_.open && !on_head()) return;
  if (!body_lease_.hold(request_.body.size() + conn_.buffer_.size())) {
    auto a = client_error(503, "body-budget-exhausted",
                          "sluice holds as many request bodies as it may "
                          "(server.maxBufferedBodyBytes); try again shortly");
    a.retry_after_seconds = 1;
    a.close_connection = true;  // the rest of the body is not read
    return answer(a);
  }
  if (p.is_done()) return handle_request();
  // Past the head, what stays buffered is an unfinished chunk-size line or
  // trailer (chunk data is consumed as it comes): Beast 1.81 bounds neither,
  // so sluice does, by the header limit.
  if (p.is_header_done() && conn_.buffer_.size() > ctx_.config.server.max_header_bytes)
    return answer(
        client_error(400, "bad-request", "a chunk-size line or the trailer exceeds the limit"));

  if (!p.is_header_done()) {
    if (!header_deadline_armed_) {
      conn_.client_.expires_after(ctx_.config.server.header_read_timeout);
      header_deadline_armed_ = true;
    }
    return read_more();
  }
  if (!body_deadline_armed_) {
    conn_.client_.expires_after(ctx_.config.server.body_read_timeout);
    body_deadline_armed_ = true;
  }
  if (request_.expect_continue && !continue_sent_) {
    continue_sent_ = true;
    net::async_write(conn_.client_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = guard()](error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->exchange_.read_more();
                     });
    return;
  }
  read_more();
}

void Exchange::read_more() {
  std::size_t size = kReadSize;
  if (request_parser_ && request_parser_->is_header_done()) {
    if (auto left = request_parser_->content_length_remaining())
      size = static_cast<std::size_t>(std::clamp<std::uint64_t>(*left, kReadSize, kBodyReadSize));
  }
  conn_.read_client(size);
}

// ---------------------------------------------------------------- accounting

void Exchange::begin_request(bool head_read) {
  rec_.open = true;
  rec_.head_unread = !head_read;
  rec_.start = std::chrono::steady_clock::now();
  rec_.first_byte = {};
  rec_.dispatched = false;
  rec_.queued = false;
  up_.endpoint = -1;
  rec_.model.clear();
  rec_.flow_id.clear();
  rec_.priority = 0;
  rec_.input_tokens = 0;
  tokens_.reset();
  quota_.logged.clear();
  quota_.waited = false;
  quota_.queue_until.reset();
  quota_.queued = 0;
  quota_.usage_asked = false;
  identity_.clear();
}

void Exchange::end_request(int status, std::string_view outcome) {
  if (!rec_.open) return;
  rec_.open = false;
  const auto now = std::chrono::steady_clock::now();
  auto& stats = thread_.stats();
  stats.outcome(outcome);
  const bool served = outcome == "served";
  if (!identity_.tenant.empty()) {
    auto& t = stats.tenant(identity_.tenant);
    auto it = t.outcomes.find(outcome);
    if (it == t.outcomes.end())
      t.outcomes.emplace(std::string(outcome), 1);
    else
      it->second += 1;
    if (served) {
      t.input_tokens += rec_.input_tokens;
      t.output_tokens += tokens_.tokens();
    }
  }
  if (protocol::is_inference(route_) && !rec_.model.empty()) {
    observe::ModelStats& m = rec_.model_stats ? *rec_.model_stats : stats.model(rec_.model);
    m.requests += 1;
    if (served) {
      m.duration.record(now - rec_.start);
      if (rec_.first_byte != std::chrono::steady_clock::time_point{})
        m.ttft[rec_.streaming ? 1 : 0].record(rec_.first_byte - rec_.start);
      m.input_tokens.record(rec_.input_tokens);
      m.output_tokens.record(tokens_.tokens());
    } else {
      auto it = m.errors.find(std::string(outcome));
      if (it == m.errors.end())
        m.errors.emplace(std::string(outcome), 1);
      else
        it->second += 1;
    }
  }
  if (rec_.model_stats) {
    rec_.model_stats->running -= 1;
    rec_.model_stats = nullptr;
  }
  tenant_permit_.reset();
  settle_quota(served);
  if (!ctx_.access_log.enabled()) return;
  using ms = std::chrono::duration<double, std::milli>;
  observe::AccessRecord r;
  r.request_id = request_id_;
  if (!rec_.head_unread) {
    r.method = request_.method_string;
    r.path = request_.target;
    r.objective = request_.objective;
  }
  r.flow = rec_.flow_id;
  r.tenant = identity_.tenant;
  r.key_id = identity_.key_id;
  r.priority = rec_.priority;
  r.model = rec_.model;
  r.outcome = outcome;
  if (up_.endpoint >= 0 && static_cast<std::size_t>(up_.endpoint) < ctx_.endpoints.size())
    r.endpoint = ctx_.endpoints.at(static_cast<std::size_t>(up_.endpoint)).config.address;
  r.status = status;
  r.total_ms = ms(now - rec_.start).count();
  r.queue_ms = rec_.dispatched ? ms(rec_.dispatched_at - rec_.start).count() : r.total_ms;
  r.upstream_ms = rec_.dispatched ? ms(now - rec_.dispatched_at).count() : 0;
  r.input_tokens = rec_.input_tokens;
  r.output_tokens = tokens_.tokens();
  r.client_cert = conn_.client_certificate_name();
  r.quota = quota_.logged;
  ctx_.access_log.write(r, thread_.log_scratch());
}

// What the request used, as the engine reported it (the usage) or as it
// was counted on the stream, whole: beyond its reservation too (carried
// into the next window, never forgiven). Not clamped to the limit its body
// stated: which of max_tokens, max_completion_tokens and max_output_tokens
// an engine honours depends on the route, and `n` choices multiply it. A
// plain answer cut before its body (the client left, an error, an
// eviction) is charged its reserved output: the engine worked on it and no
// count says how much. Not dispatched: nothing.
void Exchange::settle_quota(bool served) {
  quota_.headers = false;
  if (quota_.reservation.empty()) return;
  quota::Usage u;
  u.input_tokens = tokens_.prompt_reported() ? tokens_.prompt_tokens() : quota_.worst.input_tokens;
  u.output_tokens = tokens_.tokens();
  if (!served && !rec_.streaming && u.output_tokens == 0)
    u.output_tokens = quota_.worst.output_tokens;
  quota_.reservation.used(u);
  quota_.reservation.settle(quota::unix_now_ms());
}

// ---------------------------------------------------------------- own answers

void Exchange::answer(const flowcontrol::ErrorAnswer& a) {
  if (!rec_.open) {
    // Refused before it was whole (malformed, too large): still a request.
    begin_request(/*head_read=*/false);
  }
  end_request(a.status, !a.reason.empty() ? a.reason
                        : !a.code.empty() ? a.code
                                          : std::string_view("error"));
  phase_ = Phase::kAnswering;
  if (a.close_connection) keep_alive_ = false;
  answer_.emplace(static_cast<http::status>(a.status),
                  request_.version >= 10 ? request_.version : 11);
  auto& res = *answer_;
  res.set(http::field::server, "sluice");
  res.set(http::field::content_type, "application/json");
  if (!a.reason.empty()) res.set("x-gateway-inference-dropped-reason", a.reason);
  if (!a.llmd_reason.empty()) res.set("x-llm-d-request-dropped-reason", a.llmd_reason);
  if (a.retry_after_seconds > 0)
    res.set(http::field::retry_after, std::to_string(a.retry_after_seconds));
  if (!a.www_authenticate.empty()) res.set(http::field::www_authenticate, a.www_authenticate);
  for (const auto& [name, value] : a.headers) res.set(name, value);
  if (!request_id_.empty()) res.set("x-request-id", request_id_);
  if (a.status == 405) res.set(http::field::allow, protocol::is_inference(route_) ? "POST" : "GET");
  res.body() = a.body;
  res.keep_alive(keep_alive_ && !conn_.closing_);
  res.prepare_payload();
  conn_.client_.expires_after(ctx_.config.server.client_write_timeout);
  http::async_write(conn_.client_, res, bind<&Exchange::on_answer_written>());
}

void Exchange::on_answer_written(error_code ec, std::size_t) {
  const bool keep = !ec && answer_->keep_alive();
  if (!ec && !keep && in(Phase::kAnswering) && request_parser_ && !request_parser_->is_done()) {
    // The client may still be sending a body we refused (413) or headers we
    // could not take (431). Closing with unread input would send a reset that
    // can destroy our answer before the client reads it, so stop sending and
    // drain for a short while first (nginx's lingering close).
    answer_.reset();
    return conn_.linger();
  }
  answer_.reset();
  request_parser_.reset();
  request_id_.clear();
  conn_.first_request_ = false;
  if (ec) return conn_.close();
  if (!keep) return conn_.close_gracefully();
  conn_.wait_for_request();
}

// ---------------------------------------------------------------- the end

void Exchange::release_request_body() {
  // A large buffer leaves the exchange (small ones keep their capacity for
  // the next request): to the thread's few spares, for the next large body
  // of any of its connections (a fresh 640 KB buffer costs its page faults
  // again: +20% CPU per 640 KB request measured), else freed. So an idle
  // connection holds no body, and the thread at most kSpareBodies.
  if (request_.body.capacity() > BodyBudget::kAllowance) {
    thread_.give_back_body(request_.body);
  }
  if (up_.engine_body.capacity() > BodyBudget::kAllowance) std::string().swap(up_.engine_body);
  body_lease_.reset();
}

void Exchange::release_dispatch() {
  up_.permit.release();
  ticket_.release(tokens_.tokens());
}

void Exchange::drop_upstream() {
  if (!up_.conn) return;
  up_.conn->stream.close();  // pending operations end, aborted
  up_.dropped = std::move(up_.conn);
}

void Exchange::on_close() {
  if (quota_.waiting) {
    quota_.waiting = false;
    quota_.wait->cancel();
  }
  end_request(499, "client-closed");
}

void Exchange::release_after_close() {
  drop_upstream();
  release_dispatch();
}

void Exchange::force_close() {
  if (up_.conn) up_.conn->stream.close();
  if (quota_.waiting) {
    // Shutdown's deadline: a request waiting for quota is not resumed.
    quota_.waiting = false;
    quota_.wait->cancel();
  }
}

void Exchange::cancel() {
  cancel_sent_ = true;  // a dispatch decision already on its way is handed back
  thread_.cancel(cookie_);
  thread_.wake_dispatcher();
}

}  // namespace sluice::proxy
