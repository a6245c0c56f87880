#include "proxy/http_session.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <span>

#include "observe/log.h"
#include "protocol/engine_priority.h"
#include "protocol/openai_request.h"
#include "protocol/steering.h"
#include "proxy/reactor_hint.h"
#include "registry/flow_table.h"
#include "scheduling/least_in_flight.h"
#include "scheduling/prefix_hasher.h"

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
// A connection's read buffer grown for a large body is given back after it.
constexpr std::size_t kKeepReadBufferBytes = 64 * 1024;
constexpr std::size_t kRelayReadSize = 16384;
// Writes of several pieces up to this size are copied into one buffer.
constexpr std::size_t kCoalesceBytes = 4096;
// An endpoint's response head, and any chunk-size line or trailer after it.
constexpr std::size_t kMaxResponseHeadBytes = 64 * 1024;

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}
// A send that does not wait: how much of `b` the socket took now (0 when
// its buffer is full), or the socket's error in `ec`.
std::size_t try_send(Socket& socket, net::const_buffer b, boost::system::error_code& ec) {
  const ssize_t n = ::send(socket.native_handle(), b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ec.assign(errno, boost::system::system_category());
  return 0;
}

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// Hands flow control's decision to the session's own thread, through its
// worker's inbox.
// The first decision (dispatch or drop) takes the session along; a later
// one (an in-flight eviction, the dispatcher keeping the waiter until the
// request completes) reaches it only if it still exists. Either way the
// reference travels to the session's thread, so a session is never
// destroyed on the dispatcher's.
class SessionWaiter final : public flowcontrol::Waiter {
 public:
  SessionWaiter(std::shared_ptr<HttpSession> session, Worker& worker)
      : weak_(session), session_(std::move(session)), worker_(worker) {}
  void deliver(const flowcontrol::Decision& d) override {
    auto s = session_ ? std::move(session_) : weak_.lock();
    if (s) worker_.deliver(std::move(s), d);
  }

 private:
  std::weak_ptr<HttpSession> weak_;
  std::shared_ptr<HttpSession> session_;
  Worker& worker_;
};

}  // namespace

HttpSession::HttpSession(Socket socket, Worker& worker, ProxyContext& ctx,
                         ConnectionLimit::Permit permit)
    : client_(std::move(socket)),
      worker_(worker),
      ctx_(ctx),
      connection_permit_(std::move(permit)),
      body_lease_(ctx.body_budget.lease()) {
  registration_ = worker_.sessions.insert(worker_.sessions.end(), this);
}

HttpSession::~HttpSession() {
  worker_.deferred_watches.remove(*this);
  worker_.sessions.erase(registration_);
}

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
  client_.close();
  if (upstream_) upstream_->stream.close();
}

// ---------------------------------------------------------------- request side

void HttpSession::wait_for_request() {
  if (closing_) return close();
  state_ = State::kIdle;
  // The next request is read under the keep-alive deadline from here.
  stop_watching();
  request_id_.clear();
  route_ = protocol::Route::kUnknown;
  request_parser_.reset();
  // The last request's body is not kept (nor charged) while the connection
  // waits for the next one.
  release_request_body();
  if (client_buffer_.size() == 0 && client_buffer_.capacity() > kKeepReadBufferBytes)
    client_buffer_ = beast::flat_buffer();                // a large body's buffer is not kept idle
  if (client_buffer_.size() > 0) return parse_request();  // pipelined bytes
  // Waiting for a request to start is governed by the keep-alive idle timeout
  // (or the header timeout on a fresh connection).
  client_.expires_after(first_request_ ? ctx_.config.server.header_read_timeout
                                       : ctx_.config.server.keep_alive_idle_timeout);
  read_client();
}

void HttpSession::read_client() {
  std::size_t size = kReadSize;
  if (request_parser_ && request_parser_->is_header_done()) {
    if (auto left = request_parser_->content_length_remaining())
      size = static_cast<std::size_t>(std::clamp<std::uint64_t>(*left, kReadSize, kBodyReadSize));
  }
  client_.async_read_some(
      client_buffer_.prepare(size),
      beast::bind_front_handler(&HttpSession::on_client_read, shared_from_this()));
}

void HttpSession::on_client_read(error_code ec, std::size_t n) {
  // Idle timeout, client gone, or shutdown cancel; a request cut short by a
  // timeout or a close gets no answer (there is no one to read it).
  if (ec) return close();
  client_buffer_.commit(n);
  parse_request();
}

// Feeds what is buffered to the request parser. A request that arrived whole
// (the usual case) is handled without another trip through the event loop;
// otherwise read more under the header or body deadline.
void HttpSession::parse_request() {
  if (!request_parser_) {
    state_ = State::kReadingRequest;
    // A spare large buffer of the thread's, if the connection holds none:
    // a large body then reuses memory already mapped (release_request_body).
    if (request_.body.capacity() <= BodyBudget::kAllowance && !worker_.spare_bodies.empty()) {
      request_.body.swap(worker_.spare_bodies.back());
      worker_.spare_bodies.pop_back();
    }
    request_parser_.emplace(request_);
    request_parser_->header_limit(ctx_.config.server.max_header_bytes);
    request_parser_->body_limit(ctx_.config.server.max_body_bytes);
    request_parser_->eager(true);
    header_deadline_armed_ = false;
    body_deadline_armed_ = false;
    continue_sent_ = false;
  }
  auto& p = *request_parser_;
  error_code ec;
  while (client_buffer_.size() > 0 && !p.is_done()) {
    std::size_t used = p.put(client_buffer_.data(), ec);
    client_buffer_.consume(used);
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
  if (!body_lease_.hold(request_.body.size() + client_buffer_.size())) {
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
  if (p.is_header_done() && client_buffer_.size() > ctx_.config.server.max_header_bytes)
    return answer(
        client_error(400, "bad-request", "a chunk-size line or the trailer exceeds the limit"));

  if (!p.is_header_done()) {
    if (!header_deadline_armed_) {
      client_.expires_after(ctx_.config.server.header_read_timeout);
      header_deadline_armed_ = true;
    }
    return read_client();
  }
  if (!body_deadline_armed_) {
    client_.expires_after(ctx_.config.server.body_read_timeout);
    body_deadline_armed_ = true;
  }
  if (request_.expect_continue && !continue_sent_) {
    continue_sent_ = true;
    net::async_write(client_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->read_client();
                     });
    return;
  }
  read_client();
}

void HttpSession::handle_request() {
  keep_alive_ = request_parser_->keep_alive() && !closing_;
  route_ = protocol::classify_target(request_.target);
  begin_request(/*head_read=*/true);

  if (protocol::is_valid_steering_value(request_.request_id, 128)) {
    request_id_ = request_.request_id;
  } else {
    static constexpr char kHex[] = "0123456789abcdef";
    request_id_.resize(32);
    std::uint64_t parts[2] = {worker_.id_prefix, ++worker_.request_seq};
    for (int p = 0; p < 2; ++p)
      for (int i = 0; i < 16; ++i) request_id_[p * 16 + i] = kHex[(parts[p] >> (60 - 4 * i)) & 0xf];
  }

  if (request_.unsupported_transfer_coding) {
    keep_alive_ = false;
    return answer(client_error(501, "unsupported-transfer-coding",
                               "only Transfer-Encoding: chunked is supported"));
  }
  if (route_ == protocol::Route::kUnknown)
    return answer(client_error(404, "not-found", "no such path: " + request_.target));
  const bool inference = protocol::is_inference(route_);
  const auto method = request_.method;
  if ((inference && method != http::verb::post) || (!inference && method != http::verb::get)) {
    return answer(
        client_error(405, "method-not-allowed",
                     "method " + request_.method_string + " is not allowed on " + request_.target));
  }
  if (inference) {
    if (ctx_.draining.load(std::memory_order_relaxed)) {
      // Drained or shutting down: nothing new is admitted. Another replica
      // can take it at once.
      flowcontrol::ErrorAnswer a;
      a.status = 503;
      a.reason = "draining";
      a.llmd_reason = "rejected-shutting-down";
      a.body = flowcontrol::openai_error_body(
          "sluice is draining and admits no new requests; retry elsewhere", "server_error",
          "draining");
      a.retry_after_seconds = 1;
      a.close_connection = true;
      return answer(a);
    }
    if (!protocol::is_json_content_type(request_.content_type))
      return answer(
          client_error(400, "unsupported-content-type", "Content-Type must be application/json"));
    const RequestPolicy& policy = *worker_.policy;
    const bool hash_prefix = policy.preparation.prefix_hashes;
    prompt_text_.clear();
    auto parsed =
        protocol::parse_openai_request(request_.body, hash_prefix ? &prompt_text_ : nullptr,
                                       scheduling::prefix_text_limit(policy.preparation));
    if (!parsed.ok()) return answer(client_error(400, parsed.error_code, parsed.error_message));
    if (!protocol::is_valid_model_name(parsed.request.model, ctx_.config.server.max_model_bytes))
      return answer(client_error(400, "invalid-model",
                                 "'model' must be 1 to " +
                                     std::to_string(ctx_.config.server.max_model_bytes) +
                                     " bytes without control characters"));
    // GIE's legacy admission (flow control off): shed sheddable requests
    // while the pool is saturated.
    if (policy.legacy_detector && !request_.objective.empty()) {
      auto it = policy.objectives.find(request_.objective);
      if (it != policy.objectives.end() && it->second.priority < 0 &&
          ctx_.pool_saturated(*policy.legacy_detector)) {
        return answer(flowcontrol::answer_for(QueueOutcome::kRejectedCapacity,
                                              "system saturated, sheddable request dropped"));
      }
    }
    return admit(parsed.request);
  }
  // GET /v1/models and the like: any endpoint will do.
  dispatched_ = true;
  t_dispatched_ = t_start_;
  tried_.assign(ctx_.endpoints.size(), false);
  fallbacks_.fill(-1);
  scheduler_request_headers_.clear();
  scheduler_response_headers_.clear();
  retried_ = false;
  try_next_endpoint();
}

// ---------------------------------------------------------------- flow control

void HttpSession::admit(const protocol::OpenAIRequest& parsed) {
  flowcontrol::EnqueueRequest e;
  if (!request_.repeated_steering.empty())
    return answer(client_error(400, "repeated-steering-header",
                               "the steering header " + request_.repeated_steering +
                                   " was sent more than once; send each at most once"));
  // Steering values become table keys, labels and log fields: validated
  // here, once (protocol/steering.h), so nothing behind sees raw bytes.
  const std::size_t max_id = ctx_.config.server.max_fairness_id_bytes;
  if (!request_.fairness_id.empty() &&
      !protocol::is_valid_steering_value(request_.fairness_id, max_id))
    return answer(client_error(400, "invalid-fairness-id",
                               "the fairness id (x-llm-d-inference-fairness-id or "
                               "x-gateway-inference-fairness-id) must be 1 to " +
                                   std::to_string(max_id) +
                                   " token characters (letters, digits, !#$%&'*+-.^_`|~:/@=)"));
  if (!request_.objective.empty() && !protocol::is_valid_steering_value(request_.objective, max_id))
    return answer(client_error(400, "invalid-objective",
                               "the objective (x-llm-d-inference-objective or "
                               "x-gateway-inference-objective) must be 1 to " +
                                   std::to_string(max_id) + " token characters"));
  e.flow_id = request_.fairness_id.empty() ? "default-flow" : request_.fairness_id;
  e.flow_hash = registry::FlowTable::hash(e.flow_id);
  model_ = parsed.model;
  std::optional<std::chrono::nanoseconds> ttl;
  if (!request_.objective.empty()) {
    // An unknown objective is priority 0, as in GIE.
    auto it = worker_.policy->objectives.find(request_.objective);
    if (it != worker_.policy->objectives.end()) {
      e.priority = it->second.priority;
      ttl = it->second.ttl;
    }
  }
  if (!request_.ttl_ms.empty()) {
    std::uint64_t ms = 0;
    if (!protocol::parse_whole_ms(request_.ttl_ms, ms))
      return answer(client_error(
          400, "invalid-ttl", "x-gateway-inference-ttl-ms must be a whole number of milliseconds"));
    // 0 is no TTL of the request's own, as 0 is in the config.
    std::chrono::nanoseconds header_ttl = std::chrono::milliseconds(ms);
    if (ms > 0 && (!ttl || header_ttl < *ttl)) ttl = header_ttl;
  }
  e.ttl = ttl;
  std::uint64_t slo_ms = 0;
  if (protocol::parse_whole_ms(request_.slo_ttft_ms, slo_ms))
    e.slo_ttft = std::chrono::milliseconds(slo_ms);
  e.received = flowcontrol::Clock::now();
  e.bytes = request_.body.size();
  e.input_tokens = parsed.estimated_input_tokens;
  flow_id_ = e.flow_id;
  priority_ = e.priority;
  input_tokens_ = parsed.estimated_input_tokens;
  // A client's max_tokens only sizes the request for tokens-mode admission:
  // clamped, so in-flight token sums cannot overflow (the body goes as sent).
  static constexpr std::int64_t kMaxChargedOutputTokens = 1 << 24;
  e.max_output_tokens = static_cast<std::uint64_t>(
      std::clamp<std::int64_t>(parsed.max_tokens.value_or(0), 0, kMaxChargedOutputTokens));
  // What the scheduler needs, computed here rather than on the dispatcher.
  auto sr = std::make_shared<scheduling::Request>();
  sr->request_id = request_id_;
  sr->model = parsed.model;
  sr->session_token = request_.session_token;
  sr->input_tokens = parsed.estimated_input_tokens;
  if (worker_.policy->preparation.prefix_hashes)
    scheduling::compute_prefix_hashes(prompt_text_, parsed.model, worker_.policy->preparation, *sr,
                                      parsed.prompt_chars);
  e.scheduling = std::move(sr);

  state_ = State::kQueued;
  cancel_sent_ = false;
  watch_saw_bytes_ = false;
  // Queued, a whole body is flow control's to bound (maxBytes, displacement,
  // fairness between tenants) and, dispatched, the pool's (its concurrency):
  // the budget stops charging it, so no tenant can hold the budget with
  // queued bodies. Without the gate it is charged until the answer starts.
  if (ctx_.gated) body_lease_.reset();
  cookie_ = (static_cast<std::uint64_t>(worker_.index) << 48) | ++worker_.cookie_seq;
  ctx_.flow_control->enqueue(*worker_.producer, cookie_, std::move(e),
                             std::make_shared<SessionWaiter>(shared_from_this(), worker_));
  // The client watch is armed only if the request is still open a tick or
  // two from now (proxy/deferred_watch.h): most are answered before then.
  // Before the wake: an early inline pass may decide this request (and
  // even end it) before request_admitted() returns.
  worker_.defer_watch(*this);
  worker_.request_admitted();
}

void HttpSession::on_decision(const flowcontrol::Decision& d) {
  if (d.outcome == QueueOutcome::kEvictedPreempted) return on_evicted(d.ticket);
  if (state_ != State::kQueued) {
    // The session closed while its request waited; give back what was taken.
    if (d.outcome == QueueOutcome::kDispatched) {
      ctx_.flow_control->complete(*worker_.producer, d.ticket, 0);
      worker_.wake_dispatcher();
    }
    return;
  }
  // A close is seen by the readiness watch while it is armed (its handler
  // may still be due in this loop round: then the upstream is stopped as
  // soon as it runs). Unarmed, only a look at the socket tells a close — a
  // system call, paid only where a close is plausible: the watch went off
  // at pipelined bytes, or the request waited in the queue. A request
  // released in the pass that admitted it is sent without the look: if its
  // client left in that moment, the deferred watch stops it 10 to 20 ms
  // later.
  const auto looked_gone = [&] {
    if (watching_ || (!watch_saw_bytes_ && !d.waited)) return false;
    return client_gone();
  };
  if (d.outcome == QueueOutcome::kDispatched && (cancel_sent_ || looked_gone())) {
    // The client left while the decision was on its way (the cancel and the
    // dispatch crossed): hand the slot back at once rather than have the
    // pool generate an answer for nobody.
    ctx_.flow_control->complete(*worker_.producer, d.ticket, 0);
    worker_.wake_dispatcher();
    return close();
  }
  if (d.outcome == QueueOutcome::kDispatched) {
    dispatched_ = true;
    t_dispatched_ = std::chrono::steady_clock::now();
    model_stats_ = &worker_.stats.model(model_);
    model_stats_->running += 1;
    ticket_ = DispatchTicket(worker_, ctx_.gated, d.ticket);
    evicted_ = false;
    client_write_pending_ = false;
    tried_.assign(ctx_.endpoints.size(), false);
    retried_ = false;
    fallbacks_ = d.fallbacks;
    over_admission_ = d.over_admission;
    held_reserve_ = d.held_reserve;
    held_reserve_tokens_ = d.held_reserve_tokens;
    held_endpoints_ = d.held_endpoints;
    scheduler_request_headers_ = d.request_headers;
    scheduler_response_headers_ = d.response_headers;
    if (d.endpoint < 0 || static_cast<std::size_t>(d.endpoint) >= ctx_.endpoints.size())
      return try_next_endpoint();
    return dispatch_to(d.endpoint);
  }
  if (d.outcome == QueueOutcome::kEvictedContextCancelled) return close();
  if (!d.detail.empty()) {
    SLUICE_LOG_LIMITED(kWarn, "scheduler",
                       "request " << request_id_ << " not schedulable: " << d.detail);
    return answer(
        flowcontrol::answer_for(d.outcome, "no endpoint can serve this request: " + d.detail));
  }
  answer(flowcontrol::answer_for(d.outcome));
}

void HttpSession::arm_deferred_watch() {
  if (state_ == State::kQueued || state_ == State::kProxying) watch_client();
}

void HttpSession::watch_client() {
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
bool HttpSession::client_gone() {
  pollfd p{client_.socket().native_handle(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpSession::stop_watching() {
  worker_.deferred_watches.remove(*this);
  if (!watching_) return;
  watching_ = false;
  ++watch_generation_;  // the cancelled wait's handler will see it is stale
  error_code ignored;
  client_.socket().cancel(ignored);
}

void HttpSession::on_watch(error_code ec, std::uint64_t generation) {
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
      if (state_ == State::kIdle) return read_client();
      if (!client_gone()) {
        watch_saw_bytes_ = true;
        return;
      }
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return watch_client();
    }
  }
  if (state_ == State::kQueued) {
    cancel_sent_ = true;  // a dispatch decision already on its way is handed back
    ctx_.flow_control->cancel(*worker_.producer, cookie_);
    worker_.wake_dispatcher();
    return;  // the EvictedContextCancelled decision closes the session
  }
  // The client left mid-proxy (or while idle): stop the upstream so the
  // generation ends.
  close();
}

void DispatchTicket::report(std::uint64_t output_tokens) {
  if (!id_ || output_tokens <= reported_) return;
  reported_ = output_tokens;
  worker_->shell->report_output_tokens(*worker_->producer, id_, reported_);
  if (gated_) worker_->wake_dispatcher();
}

void DispatchTicket::release(std::uint64_t output_tokens) {
  if (!id_) return;
  worker_->shell->complete(*worker_->producer, std::exchange(id_, 0), output_tokens);
  // Gated, a completion frees room: dispatch now. Not gated, nothing waits
  // for it; the dispatcher takes it with the next request's wake (or within
  // a second), which saves a thread switch per request.
  if (gated_) worker_->wake_dispatcher();
}

void HttpSession::release_dispatch() {
  permit_.release();
  ticket_.release(tokens_.tokens());
}

void HttpSession::begin_request(bool head_read) {
  request_open_ = true;
  // An eviction belongs to the request it ended (one answered before its
  // head, or during its last write, leaves the connection open).
  evicted_ = false;
  head_unread_ = !head_read;
  t_start_ = std::chrono::steady_clock::now();
  dispatched_ = false;
  endpoint_ = -1;
  model_.clear();
  flow_id_.clear();
  priority_ = 0;
  input_tokens_ = 0;
  tokens_.reset();
}

void HttpSession::end_request(int status, std::string_view outcome) {
  if (!request_open_) return;
  request_open_ = false;
  const auto now = std::chrono::steady_clock::now();
  auto& stats = worker_.stats;
  stats.outcome(outcome);
  const bool served = outcome == "served";
  if (protocol::is_inference(route_) && !model_.empty()) {
    observe::ModelStats& m = model_stats_ ? *model_stats_ : stats.model(model_);
    m.requests += 1;
    if (served) {
      m.duration.record(now - t_start_);
      m.input_tokens.record(input_tokens_);
      m.output_tokens.record(tokens_.tokens());
    } else {
      auto it = m.errors.find(std::string(outcome));
      if (it == m.errors.end())
        m.errors.emplace(std::string(outcome), 1);
      else
        it->second += 1;
    }
  }
  if (model_stats_) {
    model_stats_->running -= 1;
    model_stats_ = nullptr;
  }
  if (!ctx_.access_log.enabled()) return;
  using ms = std::chrono::duration<double, std::milli>;
  observe::AccessRecord r;
  r.request_id = request_id_;
  if (!head_unread_) {
    r.method = request_.method_string;
    r.path = request_.target;
    r.objective = request_.objective;
  }
  r.flow = flow_id_;
  r.priority = priority_;
  r.model = model_;
  r.outcome = outcome;
  if (endpoint_ >= 0 && static_cast<std::size_t>(endpoint_) < ctx_.endpoints.size())
    r.endpoint = ctx_.endpoints.at(static_cast<std::size_t>(endpoint_)).config.address;
  r.status = status;
  r.total_ms = ms(now - t_start_).count();
  r.queue_ms = dispatched_ ? ms(t_dispatched_ - t_start_).count() : r.total_ms;
  r.upstream_ms = dispatched_ ? ms(now - t_dispatched_).count() : 0;
  r.input_tokens = input_tokens_;
  r.output_tokens = tokens_.tokens();
  ctx_.access_log.write(r, worker_.log_scratch);
}

// ---------------------------------------------------------------- upstream side

void HttpSession::try_next_endpoint() {
  // Endpoints may have joined since the decision (reload, endpoints file):
  // the per-request marks cover the pool as it is now.
  if (tried_.size() < ctx_.endpoints.size()) tried_.resize(ctx_.endpoints.size(), false);
  // The scheduler's fallbacks first, then any usable endpoint; each one
  // only if it may take the request now (reserve()). Every endpoint is
  // looked at once per request at most.
  const auto now = datalayer::Clock::now();
  for (;;) {
    int ep = -1;
    for (std::int32_t f : fallbacks_) {
      if (f >= 0 && static_cast<std::size_t>(f) < ctx_.endpoints.size() &&
          !tried_[static_cast<std::size_t>(f)] &&
          ctx_.endpoints.at(static_cast<std::size_t>(f)).usable(now)) {
        ep = f;
        break;
      }
    }
    if (ep < 0)
      ep = scheduling::pick_least_in_flight(ctx_.endpoints, tried_, now, worker_.rotation);
    if (ep < 0) break;
    tried_[static_cast<std::size_t>(ep)] = true;
    if (reserve(ep, now)) return send_to(ep);
  }
  // No endpoint is usable, or (gated) none has room: a typed 503 with
  // Retry-After rather than a request past the saturation detector's limit.
  release_dispatch();
  return answer(flowcontrol::answer_for(QueueOutcome::kRejectedNoEndpoints));
}

void HttpSession::dispatch_to(int endpoint) {
  state_ = State::kProxying;
  if (tried_.size() <= static_cast<std::size_t>(endpoint))
    tried_.resize(static_cast<std::size_t>(endpoint) + 1, false);
  tried_[static_cast<std::size_t>(endpoint)] = true;
  // The dispatcher sees neither ejections nor refused connections, and
  // counts a request against the endpoint it chose even when a fallback
  // served it: its choice is checked here.
  if (!reserve(endpoint, datalayer::Clock::now())) return try_next_endpoint();
  send_to(endpoint);
}

bool HttpSession::reserve(int endpoint, std::chrono::steady_clock::time_point now) {
  auto& ep = ctx_.endpoints.at(static_cast<std::size_t>(endpoint));
  if (!ep.usable(now)) return false;
  const auto* detector = worker_.policy->room_detector.get();
  const bool gated = ctx_.gated && ticket_ && detector;
  if (gated && held_endpoints_ > 0) {
    // The reserved endpoints, as the dispatcher counts them: the pool's
    // last held_endpoints_ not removed, never all of it.
    std::size_t in_pool = 0, after = 0;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
      if (ctx_.endpoints.at(i).removed.load(std::memory_order_relaxed)) continue;
      ++in_pool;
      after += i > static_cast<std::size_t>(endpoint);
    }
    const std::size_t lane = std::min<std::size_t>(held_endpoints_, in_pool - (in_pool > 0));
    if (after < lane) return false;
  }
  int before = 0;
  permit_ = datalayer::InFlightPermit(&ep, before);
  if (!gated) return true;
  flowcontrol::EndpointLoad load;
  const auto at = ep.metrics_ns.load(std::memory_order_acquire);
  load.has_metrics = at != 0;
  load.metrics_time = flowcontrol::TimePoint(flowcontrol::Duration(at));
  load.waiting = ep.waiting.load(std::memory_order_relaxed);
  load.running = ep.running.load(std::memory_order_relaxed);
  load.kv_cache_usage = ep.kv_cache_usage.load(std::memory_order_relaxed);
  load.in_flight = static_cast<std::uint32_t>(std::max(0, before));
  if (over_admission_ > 0) flowcontrol::over_admit(load, over_admission_);
  load.in_flight += held_reserve_;
  load.in_flight_tokens += held_reserve_tokens_;
  if (detector->has_room(load, now)) return true;
  permit_.release();
  return false;
}

void HttpSession::send_to(int endpoint) {
  state_ = State::kProxying;
  endpoint_ = endpoint;
  const auto& address = ctx_.endpoints.at(endpoint).config.address;

  // The request as the model server sees it: the client's fields minus
  // steering, hop-by-hop and framing fields, with sluice's Host, request id
  // and Content-Length. One buffer, written together with the body.
  auto& h = upstream_head_;
  h.clear();
  h += request_.method_string;
  h += ' ';
  h += request_.target;
  h += " HTTP/1.1\r\nHost: ";
  h += address;
  h += "\r\n";
  h += request_.forward_headers;
  h += scheduler_request_headers_;
  h += "x-request-id: ";
  h += request_id_;
  h += "\r\n";
  // An engine that schedules by priority gets the band's, never the
  // client's own (which would let a tenant jump the engine's queue).
  upstream_body_ = &request_.body;
  if (ctx_.endpoints.at(endpoint).config.priority_scheduling && protocol::is_inference(route_)) {
    engine_body_ =
        protocol::body_with_priority(request_.body, protocol::engine_priority_for_band(priority_));
    upstream_body_ = &engine_body_;
  }
  if (!upstream_body_->empty() || request_.method == http::verb::post) {
    h += "Content-Length: ";
    append_number(h, upstream_body_->size());
    h += "\r\n";
  }
  h += "\r\n";

  upstream_ = worker_.pool.take(endpoint);
  if (upstream_) {
    worker_.stats.endpoint(static_cast<std::size_t>(endpoint)).connections_reused += 1;
    upstream_reused_ = true;
    return write_upstream();
  }
  connect_upstream();
}

void HttpSession::connect_upstream() {
  upstream_reused_ = false;
  worker_.stats.endpoint(static_cast<std::size_t>(endpoint_)).connections_new += 1;
  upstream_ = std::make_unique<UpstreamConnection>(client_.get_executor(), endpoint_);
  upstream_->stream.expires_after(ctx_.config.server.upstream_connect_timeout);
  upstream_->stream.async_connect(
      ctx_.endpoints.at(static_cast<std::size_t>(endpoint_)).resolved,
      beast::bind_front_handler(&HttpSession::on_connect, shared_from_this()));
}

void HttpSession::on_connect(error_code ec) {
  if (state_ == State::kClosed) return;  // the client left meanwhile
  if (evicted_) return finish_evicted();
  auto& ep = ctx_.endpoints.at(endpoint_);
  if (ec) {
    worker_.stats.endpoint(static_cast<std::size_t>(endpoint_))
        .errors[static_cast<std::size_t>(observe::UpstreamError::kConnect)] += 1;
    if (ec != net::error::operation_aborted) {  // not our own cancel (shutdown)
      SLUICE_LOG_LIMITED(
          kWarn, "upstream",
          "endpoint " << ep.config.address << " unreachable (" << ec.message() << "); marked down");
      record_endpoint_failure("connecting");
      ep.mark_down(datalayer::Clock::now(), ctx_.config.server.endpoint_down_backoff);
    }
    upstream_.reset();
    permit_.release();
    return try_next_endpoint();
  }
  error_code ignored;
  upstream_->stream.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  write_upstream();
}

void HttpSession::write_upstream() {
  response_parser_.reset();
  interim_responses_ = 0;
  tokens_.reset();
  head_built_ = false;
  client_head_sent_ = false;
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  std::array<net::const_buffer, 2> buffers = {net::buffer(upstream_head_),
                                              net::buffer(*upstream_body_)};
  if (upstream_body_->empty() || coalesce(buffers, coalesced_)) {
    net::const_buffer out = upstream_body_->empty() ? buffers[0] : net::buffer(coalesced_);
    // Tried at once, as a relayed write is (write_to_client).
    error_code ec;
    const std::size_t sent = try_send(upstream_->stream.socket(), out, ec);
    if (ec || sent == out.size()) return on_upstream_written(ec, sent);
    out += sent;
    net::async_write(
        upstream_->stream, out,
        beast::bind_front_handler(&HttpSession::on_upstream_written, shared_from_this()));
    return;
  }
  net::async_write(
      upstream_->stream, buffers,
      beast::bind_front_handler(&HttpSession::on_upstream_written, shared_from_this()));
}

// Pieces that add up to a small write are copied into coalesced_: copying a
// few KB costs less than the kernel's import of a scatter list (sendmsg
// against send, measured in the proxy bench).
bool HttpSession::coalesce(std::span<const net::const_buffer> pieces, std::string& into) {
  std::size_t total = 0;
  for (const auto& b : pieces) total += b.size();
  if (pieces.size() < 2 || total > kCoalesceBytes) return false;
  into.clear();
  for (const auto& b : pieces) into.append(static_cast<const char*>(b.data()), b.size());
  return true;
}

void HttpSession::on_upstream_written(error_code ec, std::size_t) {
  if (state_ == State::kClosed) return;  // the client left meanwhile
  if (evicted_) return finish_evicted();
  if (ec) return upstream_failed_before_response(ec, "writing the request");
  response_parser_.emplace(response_);
  response_parser_->body_limit(boost::none);  // relayed, never buffered whole
  response_parser_->header_limit(kMaxResponseHeadBytes);
  response_parser_->eager(true);
  // The deadline set before the write also bounds the wait for the headers.
  read_upstream();
}

void HttpSession::read_upstream() {
  upstream_->stream.async_read_some(
      upstream_->buffer.prepare(kRelayReadSize),
      beast::bind_front_handler(&HttpSession::on_upstream_read, shared_from_this()));
}

void HttpSession::on_upstream_read(error_code ec, std::size_t n) {
  if (upstream_) HintedReads::read_done(*upstream_);
  if (state_ == State::kClosed) return;  // the client left meanwhile
  if (evicted_) return finish_evicted();
  auto& p = *response_parser_;
  // The part of an SSE event held back from the last read goes first.
  std::size_t held = 0;
  if (sse_.holding()) {
    if (response_.body.empty()) response_.body.swap(worker_.relay_body);
    held = sse_.take(response_.body);
  }
  if (ec == net::error::eof && p.got_some()) {
    // A body delimited by the connection's end is complete now.
    p.put_eof(ec);
  } else if (!ec) {
    upstream_->buffer.commit(n);
    // This read's body is parsed into the thread's buffer, in cache from
    // the last relayed read (given back in on_relay_written).
    if (response_.body.empty()) response_.body.swap(worker_.relay_body);
    while (upstream_->buffer.size() > 0 && !p.is_done()) {
      std::size_t used = p.put(upstream_->buffer.data(), ec);
      upstream_->buffer.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    // The read that ended a keep-alive answer, short (the socket drained)
    // and with nothing past it: the connection's next read is the next
    // answer's, which cannot be there before the next request is written.
    // It waits for readiness rather than trying a receive that fails
    // (proxy/reactor_hint.h). Here, in the completion of that read, and
    // not when the client has been written to, so that a close from the
    // endpoint in between is not the event the hint forgets.
    // (n > 0: a real read; the parse of buffered bytes after a 1xx comes
    // here with 0, after the interim head was written to the client, and
    // bytes that came meanwhile have had their event.)
    if (!ec && n > 0 && n < kRelayReadSize && p.keep_alive()) {
      if (p.is_done() && upstream_->buffer.size() == 0) {
        skip_next_speculative_read(upstream_->stream.socket());
      } else if (!p.is_done() && p.is_header_done() && (p.chunked() || p.content_length())) {
        // A short read in the middle of a framed body (a stream between
        // two events): the next read waits for readiness too, and the
        // connection is watched for a close that came with these bytes
        // (proxy/hinted_reads.h). Not for a body that ends with the
        // connection (there that close is the answer's end), nor on a
        // connection that will not be reused (the watch's registration is
        // paid once per connection).
        worker_.hint_read(*upstream_);
      }
    }
  }
  if (ec) {
    if (!head_built_) return upstream_failed_before_response(ec, "reading the response");
    return upstream_failed_mid_response(ec);
  }
  if (!p.is_header_done()) return read_upstream();
  // An unfinished chunk-size line or trailer is all that stays buffered past
  // the head (Beast 1.81 bounds neither): an endpoint sending an endless
  // one is an upstream error, not memory.
  if (!p.is_done() && upstream_->buffer.size() > kMaxResponseHeadBytes) {
    const error_code overflow = http::error::buffer_overflow;
    if (!head_built_) return upstream_failed_before_response(overflow, "reading the response");
    return upstream_failed_mid_response(overflow);
  }
  if (!head_built_ && response_.status / 100 == 1) return on_interim_response();
  if (!head_built_ && response_.unsupported_transfer_coding)
    return upstream_failed_before_response(http::error::bad_transfer_encoding,
                                           "reading the response (unsupported transfer coding)");
  if (!head_built_) build_client_head();
  if (response_.body.size() > held) {
    tokens_.feed(std::string_view(response_.body).substr(held));
    // Charge output to the flow as it streams (VTC), every 16 tokens.
    if (ticket_ && tokens_.tokens() >= ticket_.reported() + 16) ticket_.report(tokens_.tokens());
  }
  if (response_.is_sse && framing_ == Framing::kChunked && !p.is_done())
    sse_.hold(response_.body, held, ctx_.config.server.sse_event_hold_bytes);
  // Write when there is something to send: the head (at once, so a streaming
  // client sees the response start before the first token; together with
  // the body when it came in the same read), body bytes, or the end.
  if (!client_head_sent_ || !response_.body.empty() || p.is_done()) return write_to_client();
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  read_upstream();
}

// An interim (1xx) response came before the final one (RFC 9110 §15.2). 100
// Continue answers an Expect sluice never forwards: dropped. Others (103
// Early Hints) go to HTTP/1.1 clients. Then the final response is read with
// a fresh parser from what is buffered. 101 means the endpoint switched
// protocols under an inference request: an upstream error, never relayed.
void HttpSession::on_interim_response() {
  static constexpr int kMaxInterimResponses = 8;
  const int status = response_.status;
  if (status == 101 || ++interim_responses_ > kMaxInterimResponses) {
    return upstream_failed_before_response(
        http::error::bad_status, status == 101 ? "reading the response (101 Switching Protocols)"
                                               : "reading the response (too many 1xx responses)");
  }
  auto next = [self = shared_from_this()] {
    self->response_parser_.emplace(self->response_);
    self->response_parser_->body_limit(boost::none);
    self->response_parser_->header_limit(kMaxResponseHeadBytes);
    self->response_parser_->eager(true);
    if (self->upstream_->buffer.size() > 0) return self->on_upstream_read({}, 0);
    self->read_upstream();
  };
  if (status == 100 || request_.version < 11) return next();
  auto& h = interim_head_;
  h.assign("HTTP/1.1 ");
  append_number(h, static_cast<std::uint64_t>(status));
  h += ' ';
  h += response_.reason;
  h += "\r\n";
  h += response_.forward_headers;
  h += "\r\n";
  client_.expires_after(ctx_.config.server.client_write_timeout);
  client_write_pending_ = true;
  net::async_write(client_, net::buffer(interim_head_),
                   [self = shared_from_this(), next](error_code ec, std::size_t) {
                     self->client_write_pending_ = false;
                     if (self->state_ == State::kClosed) return;
                     if (self->evicted_ && !ec) return self->finish_evicted();
                     if (ec) {
                       self->drop_upstream();
                       self->release_dispatch();
                       return self->close();
                     }
                     next();
                   });
}

void HttpSession::upstream_failed_before_response(error_code ec, const char* stage) {
  // After an interim response the endpoint has begun answering: no retry.
  const bool got_bytes =
      interim_responses_ > 0 || (response_parser_ && response_parser_->got_some());
  auto& ep = ctx_.endpoints.at(endpoint_);
  upstream_.reset();  // never pooled after a failure
  // A kept-alive connection may have been closed by the endpoint while idle in
  // the pool: retry once on a fresh connection, but only if not a single
  // response byte came back (so the endpoint cannot have started answering).
  auto& errors = worker_.stats.endpoint(static_cast<std::size_t>(endpoint_)).errors;
  if (upstream_reused_ && !retried_ && !got_bytes && ec != beast::error::timeout) {
    errors[static_cast<std::size_t>(observe::UpstreamError::kStaleReused)] += 1;
    retried_ = true;
    SLUICE_LOG(kDebug, "upstream",
               "reused connection to " << ep.config.address << " failed while " << stage << " ("
                                       << ec.message() << "); retrying on a fresh connection");
    return connect_upstream();
  }
  errors[static_cast<std::size_t>(ec == beast::error::timeout
                                      ? observe::UpstreamError::kTimeout
                                      : observe::UpstreamError::kBeforeResponse)] += 1;
  release_dispatch();
  SLUICE_LOG_LIMITED(
      kWarn, "upstream",
      "endpoint " << ep.config.address << " failed while " << stage << ": " << ec.message());
  // A reset, an EOF or a malformed head before the response: the endpoint's
  // failure. Not a timeout (a model may think long; upstreamIdleTimeout
  // answers 504) and not our own cancel.
  if (ec != beast::error::timeout && ec != net::error::operation_aborted)
    record_endpoint_failure(stage);
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

void HttpSession::record_endpoint_failure(const char* what) {
  const auto& s = ctx_.config.server;
  const datalayer::EjectionPolicy policy{s.endpoint_ejection_consecutive_failures,
                                         s.endpoint_ejection_base_time,
                                         s.endpoint_ejection_max_time};
  std::chrono::nanoseconds backoff{};
  const auto slot = static_cast<std::size_t>(endpoint_);
  const auto verdict =
      ctx_.endpoints.record_failure(slot, datalayer::Clock::now(), policy, &backoff);
  const auto& ep = ctx_.endpoints.at(slot);
  if (verdict == datalayer::FailureVerdict::kEjected) {
    SLUICE_LOG_LIMITED(kWarn, "upstream",
                       "endpoint "
                           << ep.config.address << " ejected for "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(backoff).count()
                           << " ms after " << ep.consecutive_failures.load()
                           << " failures in a row (last " << what << ")");
  } else if (verdict == datalayer::FailureVerdict::kSpared) {
    SLUICE_LOG_LIMITED(kWarn, "upstream",
                       "endpoint " << ep.config.address << " failed "
                                   << ep.consecutive_failures.load()
                                   << " times in a row; not ejected: no other endpoint is usable");
  }
}

void HttpSession::build_client_head() {
  head_built_ = true;
  sse_.reset();
  // The answer has begun: the request will not be sent again (no retry
  // after a response byte), so its body goes, and its charge.
  release_request_body();
  auto& p = *response_parser_;
  const int status = response_.status;
  const bool bodyless = status / 100 == 1 || status == 204 || status == 304;

  // Framing towards the client: keep a Content-Length; re-chunk a chunked or
  // close-delimited body for HTTP/1.1 clients (so the connection stays
  // reusable); HTTP/1.0 clients get the raw body and a close.
  if (p.content_length()) {
    framing_ = Framing::kRaw;
  } else if (p.is_done() && (bodyless || response_.body.empty())) {
    framing_ = Framing::kNone;
  } else if (p.is_done()) {
    // A chunked (or close-delimited) body that came whole in the first
    // read: its length is known, and it must be framed by it — a
    // `Content-Length: 0` here would leave the body on the client's
    // connection to be read as its next response.
    framing_ = Framing::kRaw;
  } else if (request_.version >= 11) {
    framing_ = Framing::kChunked;
  } else {
    framing_ = Framing::kRaw;
    keep_alive_ = false;
  }
  keep_alive_ = keep_alive_ && !closing_;

  auto& h = client_head_;
  h.clear();
  h += request_.version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  append_number(h, static_cast<std::uint64_t>(status));
  h += ' ';
  if (response_.reason.empty()) {
    auto r = http::obsolete_reason(static_cast<http::status>(status));
    h.append(r.data(), r.size());
  } else {
    h += response_.reason;
  }
  h += "\r\n";
  h += response_.forward_headers;
  h += "x-gateway-destination-endpoint-served: ";
  h += ctx_.endpoints.at(endpoint_).config.address;
  h += "\r\nx-request-id: ";
  h += request_id_;
  h += "\r\n";
  h += scheduler_response_headers_;
  if (framing_ == Framing::kRaw && (p.content_length() || p.is_done())) {
    h += "Content-Length: ";
    append_number(h, p.content_length() ? *p.content_length() : response_.body.size());
    h += "\r\n";
  } else if (framing_ == Framing::kChunked) {
    h += "Transfer-Encoding: chunked\r\n";
  } else if (framing_ == Framing::kNone && !bodyless) {
    h += "Content-Length: 0\r\n";
  }
  if (!keep_alive_)
    h += "Connection: close\r\n";
  else if (request_.version < 11)
    h += "Connection: keep-alive\r\n";
  h += "\r\n";
  client_head_sent_ = false;
}

// Writes whatever is pending (the head if not yet sent, this read's body
// bytes in the client's framing, the final chunk when done) in one write.
void HttpSession::write_to_client() {
  const bool done = response_parser_->is_done();
  auto& buffers = out_buffers_;  // a member: the write op keeps a view of it
  std::size_t count = 0;
  if (!client_head_sent_) buffers[count++] = net::buffer(client_head_);
  const auto& body = response_.body;
  if (!body.empty()) {
    if (framing_ == Framing::kChunked) {
      // Once per relayed read: to_chars, not a printf per SSE event.
      char* end =
          std::to_chars(chunk_prefix_, chunk_prefix_ + sizeof chunk_prefix_ - 2, body.size(), 16)
              .ptr;
      *end++ = '\r';
      *end++ = '\n';
      chunk_prefix_size_ = static_cast<std::size_t>(end - chunk_prefix_);
      buffers[count++] = net::buffer(chunk_prefix_, chunk_prefix_size_);
      buffers[count++] = net::buffer(body);
      buffers[count++] = net::buffer("\r\n", 2);
    } else {
      buffers[count++] = net::buffer(body);
    }
  }
  if (done && framing_ == Framing::kChunked) buffers[count++] = net::buffer("0\r\n\r\n", 5);
  const std::span<const net::const_buffer> pieces(buffers.data(), count);
  // Several small pieces are framed in one buffer: mid-body the thread's
  // (the session's own is not touched per event), else the session's.
  std::string& frame = done ? coalesced_ : worker_.relay_out;
  if (count == 1 || coalesce(pieces, frame)) {
    net::const_buffer out = count == 1 ? buffers[0] : net::buffer(frame);
    // The send is tried here, in the completion that produced the bytes:
    // it almost always goes whole (a client keeps up), and saves a write
    // operation and its completion, a trip through the event loop.
    error_code ec;
    const std::size_t sent = try_send(client_.socket(), out, ec);
    if (ec || sent == out.size()) {
      // Mid-body the relay goes on at once. After the answer's last write
      // comes the read of the client's next request: started at once, its
      // receive would find nothing (+0.6 us per small request); after the
      // loop's round, as an operation's completion would run, it usually
      // finds the request there. (Measured with the last write sent at
      // once: 20.64 -> 20.17 us CPU per small request, 5 rounds.)
      if (!done) return on_relay_written(ec, sent);
      client_write_pending_ = true;
      net::post(client_.get_executor(),
                [self = shared_from_this(), ec, sent] { self->on_relay_written(ec, sent); });
      return;
    }
    // The rest is written by the operation, with the deadline. Framed in
    // the thread's buffer, it is copied to the session's (at most
    // kCoalesceBytes): the thread's serves its other sessions meanwhile.
    // A single piece (the body, or the head) is the session's own until
    // the write completes.
    out += sent;
    if (&frame != &coalesced_ && count > 1) {
      coalesced_.assign(static_cast<const char*>(out.data()), out.size());
      out = net::buffer(coalesced_);
    }
    client_.expires_after(ctx_.config.server.client_write_timeout);
    client_write_pending_ = true;
    net::async_write(client_, out,
                     beast::bind_front_handler(&HttpSession::on_relay_written, shared_from_this()));
    return;
  }
  client_.expires_after(ctx_.config.server.client_write_timeout);
  client_write_pending_ = true;
  net::async_write(client_, pieces,
                   beast::bind_front_handler(&HttpSession::on_relay_written, shared_from_this()));
}

void HttpSession::on_relay_written(error_code ec, std::size_t) {
  client_write_pending_ = false;
  if (state_ == State::kClosed) return;  // the client left meanwhile
  if (ec) {
    SLUICE_LOG(kDebug, "session",
               "client write failed (" << ec.message() << "); closing upstream connection");
    drop_upstream();  // generation stops when the endpoint sees the close
    release_dispatch();
    return close();
  }
  client_head_sent_ = true;
  response_.body.clear();
  // The thread's body buffer goes back to it (or, after a write that was
  // pending, the session's own takes its place: either way one owner each).
  response_.body.swap(worker_.relay_body);
  if (response_parser_->is_done()) return finish_response();  // done first: served
  if (evicted_) return finish_evicted();
  upstream_->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  read_upstream();
}

void HttpSession::upstream_failed_mid_response(error_code ec) {
  worker_.stats.endpoint(static_cast<std::size_t>(endpoint_))
      .errors[static_cast<std::size_t>(ec == beast::error::timeout
                                           ? observe::UpstreamError::kTimeout
                                           : observe::UpstreamError::kMidResponse)] += 1;
  end_request(response_.status,
              ec == beast::error::timeout ? "upstream-timeout" : "upstream-error");
  SLUICE_LOG_LIMITED(kWarn, "upstream",
                     "endpoint " << ctx_.endpoints.at(endpoint_).config.address
                                 << " failed mid-response: " << ec.message());
  upstream_.reset();
  release_dispatch();
  keep_alive_ = false;
  // Tell an SSE client why its stream ends, then close without the final
  // chunk, so the transfer is visibly incomplete to any HTTP client.
  end_stream_with_error("model server failed mid-stream: " + ec.message(), "upstream-error", false);
}

void HttpSession::end_stream_with_error(std::string_view message, std::string_view code,
                                        bool end_stream) {
  if (!response_.is_sse || framing_ != Framing::kChunked) return close();
  // Only whole events reach the client: the part of one that came before
  // the end is dropped (with what was held back). A client holding part of
  // an event longer than the hold gets no error event (it would be read as
  // the rest of that event): the stream just ends, visibly incomplete, and
  // an SSE client discards the unfinished event.
  if (!sse_.end(response_.body)) return close();
  std::string event =
      "data: " + flowcontrol::openai_error_body(message, "server_error", code) + "\n\n";
  char prefix[24];
  int n = std::snprintf(prefix, sizeof prefix, "%zx\r\n", event.size());
  error_event_.clear();
  if (!client_head_sent_) error_event_ += client_head_;
  if (!response_.body.empty()) {
    char p2[24];
    int m = std::snprintf(p2, sizeof p2, "%zx\r\n", response_.body.size());
    error_event_.append(p2, static_cast<std::size_t>(m));
    error_event_ += response_.body;
    error_event_ += "\r\n";
  }
  error_event_.append(prefix, static_cast<std::size_t>(n));
  error_event_ += event;
  error_event_ += "\r\n";
  if (end_stream) error_event_ += "0\r\n\r\n";
  client_.expires_after(ctx_.config.server.client_write_timeout);
  net::async_write(client_, net::buffer(error_event_),
                   [self = shared_from_this()](error_code, std::size_t) { self->close(); });
}

void HttpSession::on_evicted(std::uint64_t ticket) {
  // Only the request still being proxied: one that finished (or whose
  // client left) has given its slot back already, which confirms the
  // eviction; a later request on this connection has another ticket.
  if (state_ != State::kProxying || !ticket_ || ticket_.id() != ticket || evicted_) return;
  evicted_ = true;
  // A write to the client is under way: the slot is freed now (the engine
  // sees its connection close and stops), whatever the client's reading;
  // the write's handler then finishes the eviction (the error event).
  // Otherwise the upstream has an operation pending (connect, write or
  // read): cancelled, its handler does.
  if (client_write_pending_) {
    drop_upstream();
    release_dispatch();
    return;
  }
  if (upstream_) {
    upstream_->stream.cancel();
    return;
  }
  finish_evicted();
}

void HttpSession::finish_evicted() {
  SLUICE_LOG(kDebug, "session", "request " << request_id_ << " evicted in flight");
  // Closed, never pooled: the engine sees the connection end and frees the
  // sequence and its KV cache. The completion confirms the eviction.
  upstream_.reset();
  release_dispatch();
  if (!client_head_sent_) {
    // Nothing of the answer has reached the client: a typed answer.
    response_parser_.reset();
    return answer(flowcontrol::answer_for(QueueOutcome::kEvictedPreempted));
  }
  end_request(response_.status, "evicted-preempted");
  keep_alive_ = false;
  end_stream_with_error("request evicted in flight for higher-priority traffic",
                        "evicted-preempted", true);
}

void HttpSession::release_request_body() {
  // A large buffer leaves the session (small ones keep their capacity for
  // the next request): to the thread's few spares, for the next large body
  // of any of its connections (a fresh 640 KB buffer costs its page faults
  // again: +20% CPU per 640 KB request measured), else freed. So an idle
  // connection holds no body, and the thread at most kSpareBodies.
  if (request_.body.capacity() > BodyBudget::kAllowance) {
    if (worker_.spare_bodies.size() < Worker::kSpareBodies &&
        request_.body.capacity() <= Worker::kSpareBodyCapacity) {
      request_.body.clear();
      worker_.spare_bodies.push_back(std::move(request_.body));
    }
    std::string().swap(request_.body);
  }
  if (engine_body_.capacity() > BodyBudget::kAllowance) std::string().swap(engine_body_);
  body_lease_.reset();
}

void HttpSession::finish_response() {
  // A whole response, whatever its status (a 5xx answered cleanly is the
  // model server's verdict, not a broken endpoint): the failure streak ends.
  ctx_.endpoints.at(static_cast<std::size_t>(endpoint_)).record_success();
  end_request(response_.status, "served");
  release_dispatch();
  if (upstream_) {
    // Bytes after the response (a second response, garbage) mean the
    // connection's framing cannot be trusted: never pooled, or the next
    // request would read them as its answer.
    if (response_parser_->keep_alive() && upstream_->buffer.size() == 0)
      worker_.pool.give_back(std::move(upstream_));
    upstream_.reset();
  }
  response_parser_.reset();
  request_parser_.reset();
  first_request_ = false;
  if (!keep_alive_) return close();
  wait_for_request();
}

// ---------------------------------------------------------------- own answers

void HttpSession::answer(const flowcontrol::ErrorAnswer& a) {
  if (!request_open_) {
    // Refused before it was whole (malformed, too large): still a request.
    begin_request(/*head_read=*/false);
  }
  end_request(a.status, !a.reason.empty() ? a.reason
                        : !a.code.empty() ? a.code
                                          : std::string_view("error"));
  state_ = State::kAnswering;
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
  if (!request_id_.empty()) res.set("x-request-id", request_id_);
  if (a.status == 405) res.set(http::field::allow, protocol::is_inference(route_) ? "POST" : "GET");
  res.body() = a.body;
  res.keep_alive(keep_alive_ && !closing_);
  res.prepare_payload();
  client_.expires_after(ctx_.config.server.client_write_timeout);
  http::async_write(client_, res,
                    beast::bind_front_handler(&HttpSession::on_answer_written, shared_from_this()));
}

void HttpSession::on_answer_written(error_code ec, std::size_t) {
  const bool keep = !ec && answer_->keep_alive();
  if (!ec && !keep && state_ == State::kAnswering && request_parser_ &&
      !request_parser_->is_done()) {
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
  // The refused request's body is not needed (nor charged) while draining.
  release_request_body();
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.expires_after(std::chrono::seconds(2));  // for the whole drain
  drain();
}

void HttpSession::drain() {
  client_buffer_.clear();
  client_.async_read_some(client_buffer_.prepare(kReadSize),
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            if (ec) return self->close();  // EOF, timeout or shutdown
                            self->drain();
                          });
}

void HttpSession::close() {
  if (state_ == State::kClosed) return;
  // A request still open when the connection ends: the client left (or a
  // shutdown deadline closed it). nginx's 499.
  end_request(499, "client-closed");
  state_ = State::kClosed;
  worker_.deferred_watches.remove(*this);
  error_code ec;
  client_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  client_.close();
  drop_upstream();
  release_dispatch();
}

void HttpSession::drop_upstream() {
  if (!upstream_) return;
  upstream_->stream.close();  // pending operations end, aborted
  dropped_upstream_ = std::move(upstream_);
}

}  // namespace sluice::proxy
