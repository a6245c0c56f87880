// Admission: a request whose head and body are read goes through
// admission's steps in order (src/admission/: each a pure function that
// says go on or gives the typed answer; Pingora's phases), then to flow
// control, whose decision comes back to on_decision. Here only what is I/O
// or shared state: the flags and the clock read, the detector asked, the
// tenant's permit taken, the answer rendered, the request queued.

#include "admission/flow_request.h"
#include "admission/parse.h"
#include "admission/pool.h"
#include "admission/quota.h"
#include "admission/steering.h"
#include "observe/log.h"
#include "protocol/openai_request.h"
#include "protocol/steering.h"
#include "protocol/stream_usage.h"
#include "proxy/client_connection.h"
#include "proxy/exchange.h"
#include "registry/flow_table.h"
#include "scheduling/prefix_hasher.h"

namespace sluice::proxy {

using flowcontrol::client_error;

namespace {

// Hands flow control's decision to the connection's own thread, through
// its thread's inbox. The first decision (dispatch or drop) takes the
// connection along; a later one (an in-flight eviction, the dispatcher
// keeping the waiter until the request completes) reaches it only if it
// still exists. Either way the reference travels to the connection's
// thread, so a connection is never destroyed on the dispatcher's.
class ConnectionWaiter final : public flowcontrol::Waiter {
 public:
  ConnectionWaiter(std::shared_ptr<ClientConnection> connection, IoThread& thread)
      : weak_(connection), connection_(std::move(connection)), thread_(thread) {}
  void deliver(const flowcontrol::Decision& d) override {
    auto c = connection_ ? std::move(connection_) : weak_.lock();
    if (c) thread_.deliver(std::move(c), d);
  }

 private:
  std::weak_ptr<ClientConnection> weak_;
  std::shared_ptr<ClientConnection> connection_;
  IoThread& thread_;
};

}  // namespace

// The head was taken already (on_head: the route, the request id, who
// sent it); the body is read.
void Exchange::handle_request() {
  keep_alive_ = request_parser_->keep_alive() && !conn_.closing_;
  // Its times count from here, the request whole, as they always have.
  rec_.start = std::chrono::steady_clock::now();
  if (!check_framing_and_route()) return;
  if (route_ == protocol::Route::kModels && restricted_to_models()) return answer_models();
  if (route_ == protocol::Route::kPassthrough) return handle_passthrough();
  if (!protocol::is_inference(route_)) return forward_without_admission();
  protocol::ParseResult parsed;
  if (!check_inference_request(parsed)) return;
  if (!check_steering()) return;
  if (!check_tenant_policy(parsed.request)) return;
  if (!check_quota(parsed.request)) return;
  if (!check_legacy_saturation()) return;
  admit(parsed.request);
}

// A step's verdict: go on, or its answer is rendered.
bool Exchange::go_on(const admission::Verdict& v) {
  if (v.admitted()) return true;
  answer(v.answer());
  return false;
}

// The client's x-request-id if it is a valid token, else a new one.
void Exchange::assign_request_id() {
  if (protocol::is_valid_steering_value(request_.request_id, 128)) {
    request_id_ = request_.request_id;
  } else {
    thread_.new_request_id(request_id_);
  }
}

// admission's reading-side steps (admission/parse.h): what was read,
// judged there; a refusal answered here.
bool Exchange::check_framing_and_route() {
  return go_on(admission::check_framing_and_route(admission::Request(request_, identity_, route_)));
}

bool Exchange::check_not_draining() {
  return go_on(admission::check_not_draining(ctx_.draining.load(std::memory_order_relaxed)));
}

// An inference request: not while draining; a JSON body sluice can read
// (`parsed`, the prompt's text kept for prefix hashing), a valid model name.
bool Exchange::check_inference_request(protocol::ParseResult& parsed) {
  if (!check_not_draining()) return false;
  const RequestPolicy& policy = thread_.policy();
  prompt_text_.clear();
  admission::ParseContext c;
  c.max_model_bytes = ctx_.config.server.max_model_bytes;
  if (policy.preparation.prefix_hashes) {
    c.prompt_text = &prompt_text_;
    c.prompt_text_limit = scheduling::prefix_text_limit(policy.preparation);
  }
  admission::Request r(request_, identity_, route_);
  return go_on(admission::parse_inference_body(c, r, parsed));
}

// GIE's legacy admission (flow control off): admission's pool step sheds
// a sheddable request while the pool is saturated; whether it is, the
// detector answers here (shared endpoint state), asked only for a
// sheddable request.
bool Exchange::check_legacy_saturation() {
  const RequestPolicy& policy = thread_.policy();
  if (!policy.legacy_detector) return true;
  const bool sheddable =
      admission::sheddable(policy.objectives, admission::Request(request_, identity_, route_));
  return go_on(admission::shed_when_saturated(
      sheddable, sheddable && ctx_.pool_saturated(*policy.legacy_detector)));
}

// passthrough-parser's request (requestHandler.parsers): admitted,
// scheduled and forwarded as any other, its body unread: no model, no
// output limit, no prompt for the prefix plugins (the config refuses those
// with passthrough-parser alone). A tenant whose policy reads the body
// (models, maxTokens) cannot be held to it here: refused by the tenant step.
void Exchange::handle_passthrough() {
  if (!check_not_draining() || !check_steering()) return;
  protocol::OpenAIRequest none;
  // Sized by its body: about four bytes a token, as for a prompt.
  none.estimated_input_tokens = request_.body.size() / 4;
  prompt_text_.clear();
  if (!check_tenant_policy(none)) return;
  if (!check_quota(none)) return;
  if (!check_legacy_saturation()) return;
  admit(none);
}

// admission's quota step, between the tenant's checks and flow control:
// the request's worst case (admission/quota.h) reserved against its
// tenant's and key's limits (quota::Quotas, shared state), held until the
// request ends (end_request settles it). A request of no tenant, or under
// no limit, goes on holding nothing.
bool Exchange::check_quota(protocol::OpenAIRequest& req) {
  const auto& qp = thread_.policy().quotas;
  if (!qp || identity_.tenant.empty()) return true;
  const admission::Request r(request_, identity_, route_, &req);
  const quota::Usage worst = admission::quota_worst_case(r, qp->default_output_tokens);
  auto a = ctx_.quotas.reserve(*qp, identity_.tenant, identity_.key_id, req.model, worst,
                               quota::unix_now_ms(), quota_.scratch);
  if (a.owners_full) {
    SLUICE_LOG_LIMITED(kWarn, "quota",
                       "no room to count tenant " << identity_.tenant << "'s quota: refused");
    answer(admission::quota_capacity_refused());
    return false;
  }
  if (!a.limited) return true;
  if (!a.admit.would_refuse.empty()) {
    quota_.logged.assign("shadow:");
    quota_.logged += a.admit.would_refuse;
  }
  if (a.admit.refused && wait_for_quota(req, *a.admit.refused)) return false;
  if (a.admit.refused) {
    quota_.logged.assign(a.admit.refused->limit.name);
    auto ans = admission::quota_refused(*a.admit.refused);
    if (qp->headers != quota::HeadersMode::kNever)
      admission::rate_limit_headers(a.admit.headroom, ans.headers);
    answer(ans);
    return false;
  }
  quota_.reservation = std::move(a.admit.reservation);
  ask_stream_usage(req);
  quota_.headroom = a.admit.headroom;
  quota_.worst = worst;
  quota_.headers = qp->headers == quota::HeadersMode::kAlways;
  return true;
}

// A refusal worth waiting for: a fleet limit this replica's lease was
// short of while the fleet had room (one lease round, once; then refused
// with that wait), or a limit with onExceeded: queue that has room within
// the request's TTL (its own, else flowControl.defaultRequestTTL, else a
// minute): the request is parked, its parsed body kept, and the quota step
// runs again when the wait ends. True if parked.
bool Exchange::wait_for_quota(protocol::OpenAIRequest& req, quota::Refusal& refused) {
  std::chrono::milliseconds wait{0};
  if (refused.lease_short) {
    if (quota_.waited) {
      refused.retry_after = lease_wait().count();
      return false;
    }
    quota_.waited = true;
    wait = lease_wait();
  } else {
    if (!refused.limit.queue || !refused.retry_after || refused.unavailable) return false;
    const auto now = std::chrono::steady_clock::now();
    if (!quota_.queue_until) {
      admission::FlowRequest f;
      const admission::Request r(request_, identity_, route_, &req);
      if (!admission::build_flow_request(thread_.policy().objectives, flowcontrol::Clock::now(), r,
                                         f)
               .admitted())
        return false;
      const auto ttl =
          f.ttl ? *f.ttl
                : ctx_.config.flow_control.default_request_ttl.value_or(std::chrono::minutes(1));
      quota_.queue_until = rec_.start + std::chrono::duration_cast<std::chrono::milliseconds>(ttl);
    }
    if (*refused.retry_after > (*quota_.queue_until - now) / std::chrono::milliseconds(1))
      return false;  // (compared as counts: a wait of years cannot overflow a time point)
    wait = std::chrono::milliseconds(std::max<quota::Millis>(*refused.retry_after, 1));
    ++quota_.queued;
  }
  quota_.waiting = true;
  quota_.parked = std::move(req);
  if (!quota_.wait) quota_.wait.emplace(conn_.client_.get_executor());
  quota_.wait->expires_after(wait);
  quota_.wait->async_wait(
      [self = guard()](const error_code& ec) { self->exchange_.resume_after_lease(ec); });
  return true;
}

// A stream under a quota settles to the engine's usage only if the body
// asks for it (stream_options.include_usage): sluice asks for a client
// that did not say (one that set stream_options its own way is left as it
// is: its input settles to sluice's estimate), and takes the usage event
// out of the stream it relays (relay_what_came).
void Exchange::ask_stream_usage(const protocol::OpenAIRequest& req) {
  if (!req.stream || req.include_usage || req.stream_options) return;
  if (route_ != protocol::Route::kChatCompletions && route_ != protocol::Route::kCompletions)
    return;
  request_.body = protocol::body_with_stream_usage(request_.body);
  quota_.usage_asked = true;
}

std::chrono::milliseconds Exchange::lease_wait() const {
  const auto round = std::max<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx_.config.redis.sync_interval),
      std::chrono::milliseconds(quota::kLeaseIntervalMs));
  return round + round / 2;
}

void Exchange::resume_after_lease(const error_code& ec) {
  if (!quota_.waiting) return;  // the connection closed meanwhile
  quota_.waiting = false;
  if (ec) return;
  protocol::OpenAIRequest req = std::move(quota_.parked);
  if (!check_not_draining()) return;
  if (!check_quota(req)) return;
  if (!check_legacy_saturation()) return;
  admit(req);
}

// GET /v1/models and the like: no admission; any endpoint will do.
void Exchange::forward_without_admission() {
  rec_.dispatched = true;
  rec_.dispatched_at = rec_.start;
  up_.tried.assign(ctx_.endpoints.size(), false);
  up_.fallbacks.fill(-1);
  up_.request_headers.clear();
  up_.response_headers.clear();
  up_.upstream_port = 0;
  up_.rank_header = {};
  up_.retried = false;
  try_next_endpoint();
}

// ---------------------------------------------------------------- flow control

// admission's flow-control step (admission/flow_request.h) decides the
// request's flow, priority, TTL, TTFT objective and size on this clock
// value; here the dispatcher's request is made of it (the flow's table
// hash and the scheduler's request, both computed on this thread rather
// than the dispatcher's) and queued.
void Exchange::admit(protocol::OpenAIRequest& parsed) {
  rec_.model = parsed.model;
  admission::FlowRequest f;
  if (!go_on(admission::build_flow_request(thread_.policy().objectives, flowcontrol::Clock::now(),
                                           admission::Request(request_, identity_, route_, &parsed),
                                           f)))
    return;
  flowcontrol::EnqueueRequest e;
  e.flow_id = f.flow_id;
  e.flow_hash = registry::FlowTable::hash(e.flow_id);
  e.priority = f.priority;
  e.received = f.received;
  e.ttl = f.ttl;
  e.slo_ttft = f.slo_ttft;
  e.bytes = f.bytes;
  e.input_tokens = f.input_tokens;
  e.max_output_tokens = f.max_output_tokens;
  rec_.flow_id = e.flow_id;
  rec_.priority = e.priority;
  rec_.input_tokens = f.input_tokens;
  auto sr = std::make_shared<scheduling::Request>();
  sr->request_id = request_id_;
  sr->model = parsed.model;
  sr->session_token = request_.session_token;
  sr->input_tokens = parsed.estimated_input_tokens;
  const auto& preparation = thread_.policy().preparation;
  if (preparation.prefix_hashes)
    scheduling::compute_prefix_hashes(prompt_text_, parsed.model, preparation, *sr,
                                      parsed.prompt_chars);
  e.scheduling = std::move(sr);
  enqueue(std::move(e));
}

// admission's steering step (admission/steering.h): the values become
// table keys, labels and log fields, validated there, once.
bool Exchange::check_steering() {
  return go_on(admission::check_steering(admission::Request(request_, identity_, route_),
                                         ctx_.config.server.max_fairness_id_bytes));
}

void Exchange::enqueue(flowcontrol::EnqueueRequest e) {
  phase_ = Phase::kQueued;
  rec_.queued = true;
  rec_.enqueued_at = std::chrono::steady_clock::now();
  cancel_sent_ = false;
  conn_.watch_saw_bytes_ = false;
  // Queued, a whole body is flow control's to bound (maxBytes, displacement,
  // fairness between tenants) and, dispatched, the pool's (its concurrency):
  // the budget stops charging it, so no tenant can hold the budget with
  // queued bodies. Without the gate it is charged until the answer starts.
  if (ctx_.gated) body_lease_.reset();
  cookie_ = thread_.next_cookie();
  thread_.enqueue(cookie_, std::move(e), std::make_shared<ConnectionWaiter>(guard(), thread_));
  // The client watch is armed only if the request is still open a tick or
  // two from now (proxy/deferred_watch.h): most are answered before then.
  // Before the wake: an early inline pass may decide this request (and
  // even end it) before request_admitted() returns.
  thread_.defer_watch(conn_);
  thread_.request_admitted();
}

void Exchange::on_decision(const flowcontrol::Decision& d) {
  if (d.outcome == QueueOutcome::kEvictedPreempted) return on_evicted(d.ticket);
  if (!in(Phase::kQueued)) {
    // The connection closed while its request waited; give back what was
    // taken.
    if (d.outcome == QueueOutcome::kDispatched) {
      thread_.complete(d.ticket, 0);
      thread_.wake_dispatcher();
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
    if (conn_.watching_ || (!conn_.watch_saw_bytes_ && !d.waited)) return false;
    return conn_.client_gone();
  };
  if (d.outcome == QueueOutcome::kDispatched && (cancel_sent_ || looked_gone())) {
    // The client left while the decision was on its way (the cancel and the
    // dispatch crossed): hand the slot back at once rather than have the
    // pool generate an answer for nobody.
    thread_.complete(d.ticket, 0);
    thread_.wake_dispatcher();
    return conn_.close();
  }
  if (d.outcome == QueueOutcome::kDispatched) return on_dispatched(d);
  if (d.outcome == QueueOutcome::kEvictedContextCancelled) return conn_.close();
  if (!d.detail.empty()) {
    SLUICE_LOG_LIMITED(kWarn, "scheduler",
                       "request " << request_id_ << " not schedulable: " << d.detail);
    return answer(
        flowcontrol::answer_for(d.outcome, "no endpoint can serve this request: " + d.detail));
  }
  answer(flowcontrol::answer_for(d.outcome));
}

// Dispatched: the ticket is held from here until the request ends; the
// scheduler's choice (and its fallbacks, headers and held headroom) goes
// to the upstream call.
void Exchange::on_dispatched(const flowcontrol::Decision& d) {
  rec_.dispatched = true;
  quota_.reservation.dispatched();
  rec_.dispatched_at = std::chrono::steady_clock::now();
  rec_.model_stats = &thread_.stats().model(rec_.model);
  rec_.model_stats->running += 1;
  ticket_ = DispatchTicket(thread_, ctx_.gated, d.ticket, d.notify_started);
  relay_.write_pending = false;
  up_.tried.assign(ctx_.endpoints.size(), false);
  up_.retried = false;
  up_.fallbacks = d.fallbacks;
  up_.over_admission = d.over_admission;
  up_.held_reserve = d.held_reserve;
  up_.held_reserve_tokens = d.held_reserve_tokens;
  up_.held_endpoints = d.held_endpoints;
  up_.request_headers = d.request_headers;
  up_.response_headers = d.response_headers;
  up_.upstream_port = d.upstream_port;
  up_.rank_header = d.rank_header;
  if (d.endpoint < 0 || static_cast<std::size_t>(d.endpoint) >= ctx_.endpoints.size())
    return try_next_endpoint();
  dispatch_to(d.endpoint);
}

}  // namespace sluice::proxy
