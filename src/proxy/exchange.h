// One request on a client connection, from its first byte to the last byte
// of its answer (Envoy's ActiveStream, HAProxy's stream): reading it,
// admission (a sequence of checks, then flow control), the upstream call
// (endpoint choice, fallbacks, pooled connections, one safe retry, 1xx,
// passive health), the relay (the client's framing, whole SSE events, the
// error event), or sluice's own typed answer; and its accounting (metrics,
// access log). The connection owns one Exchange and reuses it for each of
// its requests (its strings keep their capacity).
//
// Its code is in five files, one per part of a request's life: exchange.cc
// (reading, local answers, accounting), identity.cc (who sent it, its
// tenant's policy), admission.cc, upstream_call.cc and relay.cc.
#pragma once

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "admission/request.h"
#include "auth/authenticator.h"
#include "datalayer/endpoint_set.h"
#include "flowcontrol/outcome_response.h"
#include "observe/request_stats.h"
#include "protocol/openai_request.h"
#include "protocol/output_tokens.h"
#include "protocol/proxy_parsers.h"
#include "protocol/routes.h"
#include "protocol/sse_events.h"
#include "proxy/body_budget.h"
#include "proxy/dispatch_ticket.h"
#include "proxy/io_thread.h"
#include "proxy/proxy_context.h"
#include "proxy/tenant_load.h"
#include "proxy/upstream_pool.h"
#include "quota/ledger.h"

namespace sluice::proxy {

class ClientConnection;

class Exchange {
 public:
  // Where the request is. Meaningful while its connection is busy with it
  // (ClientConnection::State::kBusy); the connection's kClosed ends every
  // phase.
  //
  //   phase       what happens                      next
  //   kReading    head and body read, limits,       kAnswering (refused, malformed,
  //               deadlines, 100-continue           too large), kQueued (admitted),
  //                                                 kCalling (no admission: GET)
  //   kQueued     flow control holds it; the        kCalling (dispatched),
  //               client watch cancels it           kAnswering (rejected, evicted
  //                                                 from the queue)
  //   kCalling    an endpoint with room, its        kRelaying (the answer's head),
  //               connection, the request written,  kCalling (a retry, a fallback),
  //               1xx answers passed on             kAnswering (no endpoint; failed
  //                                                 before the answer), kEvicted
  //   kRelaying   the answer relayed a read at a    the next request (served), the
  //               time                              close (failed mid-way), kEvicted
  //   kEvicted    flow control evicted it in        kAnswering (nothing of the answer
  //               flight: the pending operation     sent yet), the close after an
  //               is stopped, its handler ends it   SSE error event
  //   kAnswering  sluice's own answer is written    the next request, or the
  //                                                 connection's lingering close
  enum class Phase { kReading, kQueued, kCalling, kRelaying, kEvicted, kAnswering };

  explicit Exchange(ClientConnection& conn);

  Phase phase() const { return phase_; }
  // The request ends before its next one is read on the connection: its
  // id and route forgotten, its body released.
  void reset();
  // Feeds the connection's buffered bytes to the request's parser (begins
  // a request if none is being read).
  void parse_request();
  // Flow control's decision for this request (on its thread).
  void on_decision(const flowcontrol::Decision& d);
  // The client left while the request was queued: cancel it (the
  // dispatcher's EvictedContextCancelled decision closes the connection).
  void cancel();
  // The connection closes: the accounting of a request still open (499);
  // then, its socket closed, the upstream and the dispatch slot go.
  void on_close();
  void release_after_close();
  // Shutdown's deadline: the upstream is closed too.
  void force_close();
  // The connection is going away: the request's body is released.
  void release_request_body();

 private:
  using error_code = boost::beast::error_code;
  // How the response body is framed towards the client.
  enum class Framing { kNone, kRaw, kChunked };

  // The upstream call's state for the current request.
  struct UpstreamCall {
    int endpoint = -1;
    datalayer::InFlightPermit permit;
    std::unique_ptr<UpstreamConnection> conn;
    // A connection dropped while an operation on it may still be pending
    // (the client left mid-write): its socket is closed, and the object
    // lives on with the exchange, whose handlers hold the connection, so a
    // composed write that resumes on it (a partial write's completion
    // already queued) finds it alive, fails at once and stops.
    std::unique_ptr<UpstreamConnection> dropped;
    bool reused = false;
    bool retried = false;
    std::vector<bool> tried;
    // The scheduler's answer: fallbacks after the primary, header lines.
    std::array<std::int32_t, 3> fallbacks{-1, -1, -1};
    std::string request_headers;
    std::string response_headers;
    // Data parallelism: the port to connect to on the endpoint's host (0:
    // its own) and the header naming the endpoint (empty: none).
    std::uint16_t upstream_port = 0;
    std::string_view rank_header;
    std::uint32_t over_admission = 0;  // the decision's allowance past the detector
    // The decision's held headroom (flowcontrol::Decision::held_*).
    std::uint32_t held_reserve = 0;
    std::uint64_t held_reserve_tokens = 0;
    std::uint32_t held_endpoints = 0;
    std::string head;  // request line + headers sent to the endpoint
    // The body sent to the endpoint: the client's, or engine_body (with
    // the band's engine priority) for an endpoint that schedules by
    // priority.
    const std::string* body = nullptr;
    std::string engine_body;
  };

  // The relay's state for the current answer.
  struct Relay {
    protocol::ResponseHead response;
    std::optional<protocol::RelayResponseParser> parser;
    std::string client_head;  // status line + headers sent to the client
    bool head_sent = false;
    bool write_pending = false;  // a relay or interim write to the client is under way
    int interim_responses = 0;   // 1xx before the final response
    std::string interim_head;    // a 1xx relayed to the client
    Framing framing = Framing::kRaw;
    std::array<boost::asio::const_buffer, 5> out;
    // Small writes are copied into one buffer (relay.cc, kCoalesceBytes):
    // one send() instead of a sendmsg() of several pieces.
    std::string coalesced;
    char chunk_prefix[24];
    std::size_t chunk_prefix_size = 0;
    std::string error_event;
    // An SSE stream relayed chunked: the part of an event past a read's
    // last blank line is held back for the next read, so the client only
    // ever holds whole events (protocol/sse_events.h).
    protocol::SseEventHold sse;
  };

  // For end_request: the metrics and the access-log line (the strings keep
  // their capacity between requests).
  struct Record {
    bool open = false;
    bool head_unread = false;  // refused before its head was parsed: no method/path to log
    bool dispatched = false;
    bool queued = false;  // went through flow control's queue (enqueue to dispatch)
    std::chrono::steady_clock::time_point start{};
    std::chrono::steady_clock::time_point enqueued_at{};
    std::chrono::steady_clock::time_point dispatched_at{};
    // The first response body bytes (none yet: the epoch), and whether the
    // response was an event stream (llm_d_epp_request_ttft_seconds).
    std::chrono::steady_clock::time_point first_byte{};
    bool streaming = false;
    std::string model;
    std::string flow_id;
    int priority = 0;
    std::uint64_t input_tokens = 0;
    observe::ModelStats* model_stats = nullptr;  // set while counted as running
  };

  // The connection, kept alive by the handler it is captured in.
  std::shared_ptr<ClientConnection> guard();
  // A completion handler that keeps the connection alive and calls Fn on
  // its exchange (defined in client_connection.h).
  template <void (Exchange::*Fn)(boost::beast::error_code, std::size_t)>
  auto bind();
  bool closed() const;
  // In phase `p`, the connection busy with this exchange.
  bool in(Phase p) const;

  // Reading (exchange.cc).
  void begin_parser();
  void read_more();
  // Accounting (exchange.cc): begins a request (its head parsed, or refused
  // before that); ends it once, whichever way it ends.
  void begin_request(bool head_read);
  void end_request(int status, std::string_view outcome);

  // Who the request is and what its tenant may do (identity.cc): the I/O
  // around admission's identity and tenant steps (src/admission/), each
  // answering and returning false when the request may not go on.
  bool on_head();
  bool peer_trusted();
  bool authenticated() const;
  bool check_identity();
  bool has_tenant_policy() const;
  bool check_tenant_policy(protocol::OpenAIRequest& req);
  // GET /v1/models of a tenant restricted to some models: sluice answers
  // from the pool's catalogue, with only those.
  bool restricted_to_models() const;
  void answer_models();

  // Admission (admission.cc): the checks in order, each a step that
  // answers and returns false when the request may not go on.
  void handle_request();
  bool go_on(const admission::Verdict& v);
  void assign_request_id();
  bool check_framing_and_route();
  bool check_inference_request(protocol::ParseResult& parsed);
  bool check_not_draining();
  void handle_passthrough();
  bool check_quota(protocol::OpenAIRequest& req);
  bool wait_for_quota(protocol::OpenAIRequest& req, quota::Refusal& refused);
  void ask_stream_usage(const protocol::OpenAIRequest& req);
  // After a wait for a lease: the quota step again, and on.
  void resume_after_lease(const error_code& ec);
  // How long a request short of lease waits (about one lease round).
  std::chrono::milliseconds lease_wait() const;
  bool check_legacy_saturation();
  void forward_without_admission();
  void admit(protocol::OpenAIRequest& parsed);
  bool check_steering();
  void enqueue(flowcontrol::EnqueueRequest e);
  void on_dispatched(const flowcontrol::Decision& d);

  // The upstream call (upstream_call.cc).
  void dispatch_to(int endpoint);
  // Takes an in-flight slot on `endpoint` if it is usable (not removed,
  // down or ejected) and, for a request flow control dispatched, has room
  // by the saturation detector counting the requests sluice has on it.
  bool reserve(int endpoint, std::chrono::steady_clock::time_point now);
  bool outside_held_endpoints(int endpoint) const;
  // With the slot taken: a pooled connection, else a new one.
  void send_to(int endpoint);
  void build_upstream_head(int endpoint);
  void try_next_endpoint();
  void connect_upstream();
  void on_connect(error_code ec);
  void on_tls_handshake(error_code ec);
  void connect_failed(error_code ec, const char* what);
  bool wants_tls(int endpoint) const;  // per the request policy
  void write_upstream();
  void on_upstream_written(error_code ec, std::size_t n);
  void start_response_parser();
  void read_upstream();
  void on_interim_response();
  void upstream_failed_before_response(error_code ec, const char* stage);
  // Passive health: the current endpoint failed (`what`, for the log).
  void record_endpoint_failure(const char* what);
  void drop_upstream();
  // Ends a dispatched request's accounting: in-flight permit, and flow
  // control's completion (with the output tokens counted). Idempotent.
  void release_dispatch();

  // The relay (relay.cc).
  void on_upstream_read(error_code ec, std::size_t n);
  std::size_t take_held_event();
  void parse_response(error_code& ec, std::size_t n);
  void hint_next_read(std::size_t n);
  void relay_what_came(std::size_t held);
  void build_client_head();
  Framing choose_framing(bool bodyless);
  void write_to_client();
  void on_relay_written(error_code ec, std::size_t n);
  void upstream_failed_mid_response(error_code ec);
  // Ends a relayed chunked SSE stream with an error event (`code`), then
  // the final chunk if `end_stream` (else the transfer is left visibly
  // incomplete), and closes.
  void end_stream_with_error(std::string_view message, std::string_view code, bool end_stream);
  // Evicted in flight (flow control, for a higher band): the upstream is
  // stopped (its pending operation ends) and finish_evicted() answers.
  void on_evicted(std::uint64_t ticket);
  void finish_evicted();
  void finish_response();

  // Settles the quota hold to what the request used (exchange.cc).
  void settle_quota(bool served);

  // Sluice's own answers (exchange.cc).
  void answer(const flowcontrol::ErrorAnswer& a);
  void on_answer_written(error_code ec, std::size_t n);

  ClientConnection& conn_;
  IoThread& thread_;
  ProxyContext& ctx_;
  Phase phase_ = Phase::kReading;
  protocol::RequestHead request_;
  std::optional<protocol::ProxyRequestParser> request_parser_;
  protocol::Route route_ = protocol::Route::kUnknown;
  bool keep_alive_ = true;
  bool header_deadline_armed_ = false;
  bool body_deadline_armed_ = false;
  bool continue_sent_ = false;
  std::string request_id_;
  auth::Identity identity_;           // who the request is (check_identity)
  TenantLoad::Permit tenant_permit_;  // one of its tenant's maxConcurrency
  std::int8_t peer_trusted_ = -1;     // the connection's peer is a trusted proxy (-1: not asked)
  // The request's body bytes, charged to server.maxBufferedBodyBytes while
  // it is read and until the request ends.
  BodyBudget::Lease body_lease_;
  std::string prompt_text_;  // scratch for prefix hashing (keeps capacity)
  // Flow control.
  std::uint64_t cookie_ = 0;  // this request's id towards the dispatcher
  DispatchTicket ticket_;     // held once dispatched, until completed
  bool cancel_sent_ = false;  // the queued request's cancel went to the dispatcher
  protocol::OutputTokenCounter tokens_;
  // The request's hold on its quotas (issue 41): reserved by check_quota,
  // marked when dispatched, settled by end_request to what it used.
  struct QuotaHold {
    quota::Reservation reservation;
    quota::Headroom headroom;
    quota::Usage worst;
    bool headers = false;  // x-ratelimit-* on the relayed answer
    std::string scratch;   // owner names (keeps capacity)
    std::string logged;    // the access log's quota field (refused, or shadow:<name>)
    // A fleet limit this replica's lease was short of: the request waits
    // one lease round, once (resume_after_lease), its parsed request kept.
    std::optional<boost::asio::steady_timer> wait;
    protocol::OpenAIRequest parked;
    bool waited = false;   // this request waited for a lease already
    bool waiting = false;  // the wait is pending (on_close ends it)
    // onExceeded: queue: waits until this (its TTL); how many times.
    std::optional<std::chrono::steady_clock::time_point> queue_until;
    std::uint32_t queued = 0;
    // The forwarded body asks for the stream's usage on the client's
    // behalf: the usage event is taken out of what the client sees.
    bool usage_asked = false;
  } quota_;
  UpstreamCall up_;
  Relay relay_;
  Record rec_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> answer_;
};

}  // namespace sluice::proxy
