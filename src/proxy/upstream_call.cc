// The upstream call: the endpoint (the scheduler's choice, its fallbacks,
// then any usable one with room), a pooled or new connection, the request
// written, the answer's head awaited (1xx relayed or dropped), and one retry
// on a fresh connection when a pooled one failed before any answer.
#include <boost/asio/write.hpp>

#include "datalayer/upstream_tls.h"
#include "observe/log.h"
#include "protocol/engine_priority.h"
#include "proxy/client_connection.h"
#include "proxy/exchange.h"
#include "proxy/wire.h"
#include "scheduling/least_in_flight.h"
#include "scheduling/plugins/data_parallel_profile_handler.h"

namespace sluice::proxy {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using flowcontrol::client_error;

void DispatchTicket::report(std::uint64_t output_tokens) {
  if (!id_ || output_tokens <= reported_) return;
  reported_ = output_tokens;
  thread_->report_output_tokens(id_, reported_);
  if (gated_) thread_->wake_dispatcher();
}

void DispatchTicket::started() {
  if (!id_ || started_) return;
  started_ = true;
  thread_->response_started(id_);  // no wake: it frees no room
}

void DispatchTicket::release(std::uint64_t output_tokens) {
  if (!id_) return;
  thread_->complete(std::exchange(id_, 0), output_tokens);
  // Gated, a completion frees room: dispatch now. Not gated, nothing waits
  // for it; the dispatcher takes it with the next request's wake (or within
  // a second), which saves a thread switch per request.
  if (gated_) thread_->wake_dispatcher();
}

void Exchange::try_next_endpoint() {
  // Endpoints may have joined since the decision (reload, endpoints file):
  // the per-request marks cover the pool as it is now.
  if (up_.tried.size() < ctx_.endpoints.size()) up_.tried.resize(ctx_.endpoints.size(), false);
  // The scheduler's fallbacks first, then any usable endpoint; each one
  // only if it may take the request now (reserve()). Every endpoint is
  // looked at once per request at most.
  const auto now = datalayer::Clock::now();
  for (;;) {
    int ep = -1;
    for (std::int32_t f : up_.fallbacks) {
      if (f >= 0 && static_cast<std::size_t>(f) < ctx_.endpoints.size() &&
          !up_.tried[static_cast<std::size_t>(f)] &&
          ctx_.endpoints.at(static_cast<std::size_t>(f)).usable(now)) {
        ep = f;
        break;
      }
    }
    if (ep < 0)
      ep = scheduling::pick_least_in_flight(ctx_.endpoints, up_.tried, now, thread_.rotation());
    if (ep < 0) break;
    up_.tried[static_cast<std::size_t>(ep)] = true;
    if (reserve(ep, now)) return send_to(ep);
  }
  // No endpoint is usable, or (gated) none has room: a typed 503 with
  // Retry-After rather than a request past the saturation detector's limit.
  release_dispatch();
  return answer(flowcontrol::answer_for(QueueOutcome::kRejectedNoEndpoints));
}

void Exchange::dispatch_to(int endpoint) {
  phase_ = Phase::kCalling;
  if (up_.tried.size() <= static_cast<std::size_t>(endpoint))
    up_.tried.resize(static_cast<std::size_t>(endpoint) + 1, false);
  up_.tried[static_cast<std::size_t>(endpoint)] = true;
  // The dispatcher sees neither ejections nor refused connections, and
  // counts a request against the endpoint it chose even when a fallback
  // served it: its choice is checked here.
  if (!reserve(endpoint, datalayer::Clock::now())) return try_next_endpoint();
  send_to(endpoint);
}

bool Exchange::reserve(int endpoint, std::chrono::steady_clock::time_point now) {
  auto& ep = ctx_.endpoints.at(static_cast<std::size_t>(endpoint));
  if (!ep.usable(now)) return false;
  const auto* detector = thread_.policy().room_detector.get();
  const bool gated = ctx_.gated && ticket_ && detector;
  if (gated && up_.held_endpoints > 0) {
    // The reserved endpoints, as the dispatcher counts them: the pool's
    // last held_endpoints not removed, never all of it.
    std::size_t in_pool = 0, after = 0;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
      if (ctx_.endpoints.at(i).removed.load(std::memory_order_relaxed)) continue;
      ++in_pool;
      after += i > static_cast<std::size_t>(endpoint);
    }
    const std::size_t lane = std::min<std::size_t>(up_.held_endpoints, in_pool - (in_pool > 0));
    if (after < lane) return false;
  }
  int before = 0;
  up_.permit = datalayer::InFlightPermit(&ep, before);
  if (!gated) return true;
  auto load = endpoint_load(ep, before);
  if (up_.over_admission > 0) flowcontrol::over_admit(load, up_.over_admission);
  load.in_flight += up_.held_reserve;
  load.in_flight_tokens += up_.held_reserve_tokens;
  if (detector->has_room(load, now)) return true;
  up_.permit.release();
  return false;
}

bool Exchange::wants_tls(int endpoint) const {
  const auto& tls_set = thread_.policy().upstream_tls;
  return tls_set && tls_set->for_address(ctx_.endpoints.at(endpoint).config.address) != nullptr;
}

void Exchange::send_to(int endpoint) {
  phase_ = Phase::kCalling;
  up_.endpoint = endpoint;
  build_upstream_head(endpoint);
  up_.conn = thread_.pool().take(endpoint);
  // A pooled connection made before a reload turned TLS on or off for this
  // endpoint is not used: no request goes in clear once TLS is asked for.
  // Nor one to another port of its host than this request's (a reload
  // turned data parallelism on or off, or changed primaryPort).
  if (up_.conn &&
      (up_.conn->stream.tls() != wants_tls(endpoint) || up_.conn->port != up_.upstream_port)) {
    up_.conn->stream.close();
    up_.conn.reset();
  }
  if (up_.conn) {
    thread_.stats().endpoint(static_cast<std::size_t>(endpoint)).connections_reused += 1;
    up_.reused = true;
    return write_upstream();
  }
  connect_upstream();
}

// The request as the model server sees it: the client's fields minus
// steering, hop-by-hop and framing fields, with sluice's Host, request id
// and Content-Length. One buffer, written together with the body.
void Exchange::build_upstream_head(int endpoint) {
  const auto& config = ctx_.endpoints.at(endpoint).config;
  const auto& address = config.address;
  auto& h = up_.head;
  h.clear();
  h += request_.method_string;
  h += ' ';
  h += request_.target;
  h += " HTTP/1.1\r\nHost: ";
  if (up_.upstream_port != 0)  // data parallelism: the host's primary port
    scheduling::DataParallelProfileHandler::append_rank_address(h, config.host, up_.upstream_port);
  else
    h += address;
  h += "\r\n";
  h += request_.forward_headers;
  // The engine's own credential when one is configured, and then never the
  // client's. Else the client's Authorization goes on only where sluice
  // did not check it (auth off, a trusted proxy's request): a tenant's
  // sluice key or token is never the engine's business.
  if (const auto& cred = thread_.policy().credentials->for_address(address); !cred.empty()) {
    h += "Authorization: ";
    h += cred;
    h += "\r\n";
  } else if (!authenticated()) {
    h += request_.authorization_lines;
  }
  h += up_.request_headers;
  // The rank this attempt goes to (a fallback names its own); the client's
  // own field of that name was dropped by the parser.
  if (!up_.rank_header.empty()) {
    h += up_.rank_header;
    h += ": ";
    scheduling::DataParallelProfileHandler::append_rank_address(h, config.host, config.port);
    h += "\r\n";
  }
  h += "x-request-id: ";
  h += request_id_;
  h += "\r\n";
  // An engine that schedules by priority gets the band's, never the
  // client's own (which would let a tenant jump the engine's queue).
  up_.body = &request_.body;
  if ((ctx_.endpoints.at(endpoint).config.priority_scheduling ||
       thread_.policy().propagate_priority) &&
      protocol::is_inference(route_)) {
    up_.engine_body = protocol::body_with_priority(
        request_.body, protocol::engine_priority_for_band(rec_.priority));
    up_.body = &up_.engine_body;
  }
  if (!up_.body->empty() || request_.method == http::verb::post) {
    h += "Content-Length: ";
    wire::append_number(h, up_.body->size());
    h += "\r\n";
  }
  h += "\r\n";
}

void Exchange::connect_upstream() {
  up_.reused = false;
  thread_.stats().endpoint(static_cast<std::size_t>(up_.endpoint)).connections_new += 1;
  up_.conn = std::make_unique<UpstreamConnection>(conn_.client_.get_executor(), up_.endpoint);
  up_.conn->port = up_.upstream_port;
  // The endpoint's address, or (data parallelism) its host's primary port:
  // the same resolved host, so no lookup and no allocation.
  auto to = ctx_.endpoints.at(static_cast<std::size_t>(up_.endpoint)).resolved;
  if (up_.upstream_port != 0) to.port(up_.upstream_port);
  up_.conn->stream.expires_after(ctx_.config.server.upstream_connect_timeout);
  up_.conn->stream.async_connect(
      to, [self = guard()](error_code ec) { self->exchange_.on_connect(ec); });
}

void Exchange::on_connect(error_code ec) {
  if (closed()) return;  // the client left meanwhile
  if (phase_ == Phase::kEvicted) return finish_evicted();
  if (ec) return connect_failed(ec, "unreachable");
  error_code ignored;
  up_.conn->stream.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  const auto& ep = ctx_.endpoints.at(up_.endpoint).config;
  const auto& tls_set = thread_.policy().upstream_tls;
  auto tls = tls_set ? tls_set->for_address(ep.address) : nullptr;
  if (!tls) return write_upstream();
  // TLS towards this endpoint: the handshake (the server verified) is part
  // of connecting, under the same timeout; its failure is a connect failure.
  if (!up_.conn->stream.start_tls(tls, tls->server_name.empty() ? ep.host : tls->server_name))
    return connect_failed(net::error::invalid_argument, "TLS: the server name is refused;");
  up_.conn->stream.expires_after(ctx_.config.server.upstream_connect_timeout);
  up_.conn->stream.async_handshake(
      [self = guard()](error_code ec) { self->exchange_.on_tls_handshake(ec); });
}

void Exchange::on_tls_handshake(error_code ec) {
  if (closed()) return;
  if (phase_ == Phase::kEvicted) return finish_evicted();
  if (ec) return connect_failed(ec, "TLS handshake failed");
  write_upstream();
}

// Connecting failed (TCP or TLS): counted, the endpoint marked down and
// passive health told, the next endpoint tried.
void Exchange::connect_failed(error_code ec, const char* what) {
  auto& ep = ctx_.endpoints.at(up_.endpoint);
  thread_.stats()
      .endpoint(static_cast<std::size_t>(up_.endpoint))
      .errors[static_cast<std::size_t>(observe::UpstreamError::kConnect)] += 1;
  if (ec != net::error::operation_aborted) {  // not our own cancel (shutdown)
    SLUICE_LOG_LIMITED(kWarn, "upstream",
                       "endpoint " << ep.config.address << " " << what << " (" << ec.message()
                                   << "); marked down");
    record_endpoint_failure("connecting");
    ep.mark_down(datalayer::Clock::now(), ctx_.config.server.endpoint_down_backoff);
  }
  up_.conn.reset();
  up_.permit.release();
  return try_next_endpoint();
}

void Exchange::write_upstream() {
  relay_.parser.reset();
  relay_.interim_responses = 0;
  tokens_.reset();
  relay_.head_sent = false;
  up_.conn->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  std::array<net::const_buffer, 2> buffers = {net::buffer(up_.head), net::buffer(*up_.body)};
  if (up_.body->empty() || wire::coalesce(buffers, relay_.coalesced)) {
    net::const_buffer out = up_.body->empty() ? buffers[0] : net::buffer(relay_.coalesced);
    // Tried at once, as a relayed write is (write_to_client).
    error_code ec;
    // (Plain TCP only: under TLS the bytes go through the session.)
    const std::size_t sent =
        up_.conn->stream.tls() ? 0 : wire::try_send(up_.conn->stream.socket(), out, ec);
    if (ec || sent == out.size()) return on_upstream_written(ec, sent);
    out += sent;
    net::async_write(up_.conn->stream, out, bind<&Exchange::on_upstream_written>());
    return;
  }
  net::async_write(up_.conn->stream, buffers, bind<&Exchange::on_upstream_written>());
}

void Exchange::on_upstream_written(error_code ec, std::size_t) {
  if (closed()) return;  // the client left meanwhile
  if (phase_ == Phase::kEvicted) return finish_evicted();
  if (ec) return upstream_failed_before_response(ec, "writing the request");
  start_response_parser();
  // The deadline set before the write also bounds the wait for the headers.
  read_upstream();
}

void Exchange::read_upstream() {
  up_.conn->stream.async_read_some(up_.conn->buffer.prepare(wire::kRelayReadSize),
                                   bind<&Exchange::on_upstream_read>());
}

// An interim (1xx) response came before the final one (RFC 9110 §15.2). 100
// Continue answers an Expect sluice never forwards: dropped. Others (103
// Early Hints) go to HTTP/1.1 clients. Then the final response is read with
// a fresh parser from what is buffered. 101 means the endpoint switched
// protocols under an inference request: an upstream error, never relayed.
void Exchange::on_interim_response() {
  static constexpr int kMaxInterimResponses = 8;
  const int status = relay_.response.status;
  if (status == 101 || ++relay_.interim_responses > kMaxInterimResponses) {
    return upstream_failed_before_response(
        http::error::bad_status, status == 101 ? "reading the response (101 Switching Protocols)"
                                               : "reading the response (too many 1xx responses)");
  }
  auto next = [self = guard()] {
    auto& x = self->exchange_;
    x.start_response_parser();
    if (x.up_.conn->buffer.size() > 0) return x.on_upstream_read({}, 0);
    x.read_upstream();
  };
  if (status == 100 || request_.version < 11) return next();
  auto& h = relay_.interim_head;
  h.assign("HTTP/1.1 ");
  wire::append_number(h, static_cast<std::uint64_t>(status));
  h += ' ';
  h += relay_.response.reason;
  h += "\r\n";
  h += relay_.response.forward_headers;
  h += "\r\n";
  conn_.client_.expires_after(ctx_.config.server.client_write_timeout);
  relay_.write_pending = true;
  net::async_write(conn_.client_, net::buffer(relay_.interim_head),
                   [self = guard(), next](error_code ec, std::size_t) {
                     auto& x = self->exchange_;
                     x.relay_.write_pending = false;
                     if (x.closed()) return;
                     if (x.phase_ == Phase::kEvicted && !ec) return x.finish_evicted();
                     if (ec) {
                       x.drop_upstream();
                       x.release_dispatch();
                       return self->close();
                     }
                     next();
                   });
}

void Exchange::upstream_failed_before_response(error_code ec, const char* stage) {
  // After an interim response the endpoint has begun answering: no retry.
  const bool got_bytes =
      relay_.interim_responses > 0 || (relay_.parser && relay_.parser->got_some());
  auto& ep = ctx_.endpoints.at(up_.endpoint);
  up_.conn.reset();  // never pooled after a failure
  // A kept-alive connection may have been closed by the endpoint while idle in
  // the pool: retry once on a fresh connection, but only if not a single
  // response byte came back (so the endpoint cannot have started answering).
  auto& errors = thread_.stats().endpoint(static_cast<std::size_t>(up_.endpoint)).errors;
  if (up_.reused && !up_.retried && !got_bytes && ec != beast::error::timeout) {
    errors[static_cast<std::size_t>(observe::UpstreamError::kStaleReused)] += 1;
    up_.retried = true;
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

void Exchange::record_endpoint_failure(const char* what) {
  const auto& s = ctx_.config.server;
  const datalayer::EjectionPolicy policy{s.endpoint_ejection_consecutive_failures,
                                         s.endpoint_ejection_base_time,
                                         s.endpoint_ejection_max_time};
  std::chrono::nanoseconds backoff{};
  const auto slot = static_cast<std::size_t>(up_.endpoint);
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

void Exchange::start_response_parser() {
  relay_.parser.emplace(relay_.response, quota_.headers);
  relay_.parser->body_limit(boost::none);  // relayed, never buffered whole
  relay_.parser->header_limit(wire::kMaxResponseHeadBytes);
  relay_.parser->eager(true);
}

}  // namespace sluice::proxy
