// One client connection: reads requests (limits, timeouts), validates and
// parses them, picks an endpoint, forwards over a pooled upstream connection
// and relays the response a buffer at a time.
//
// Runs entirely on its Worker's thread (the single-threaded io_context is the
// connection's strand). Kept alive by shared_from_this in every handler.
#pragma once

#include <array>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "datalayer/endpoint_set.h"
#include "flowcontrol/outcome_response.h"
#include "protocol/openai_request.h"
#include "protocol/output_tokens.h"
#include "protocol/proxy_parsers.h"
#include "protocol/routes.h"
#include "protocol/sse_events.h"
#include "proxy/io_thread.h"
#include "proxy/proxy_context.h"
#include "proxy/upstream_pool.h"

namespace sluice::proxy {

// Flow control's credit for one dispatched request: handed back exactly once,
// by release() with the output tokens counted, or by the destructor with the
// last count reported, whichever way the request ends (Seastar's
// semaphore_units). Lives on the session's I/O thread.
class DispatchTicket {
 public:
  DispatchTicket() = default;
  DispatchTicket(Worker& worker, bool gated, std::uint64_t id)
      : worker_(&worker), gated_(gated), id_(id) {}
  DispatchTicket(DispatchTicket&& o) noexcept { *this = std::move(o); }
  DispatchTicket& operator=(DispatchTicket&& o) noexcept {
    if (this != &o) {
      release(reported_);
      worker_ = std::exchange(o.worker_, nullptr);
      gated_ = o.gated_;
      id_ = std::exchange(o.id_, 0);
      reported_ = std::exchange(o.reported_, 0);
    }
    return *this;
  }
  DispatchTicket(const DispatchTicket&) = delete;
  DispatchTicket& operator=(const DispatchTicket&) = delete;
  ~DispatchTicket() { release(reported_); }

  std::uint64_t id() const { return id_; }
  explicit operator bool() const { return id_ != 0; }
  // Charges output tokens as they stream (VTC); keeps the count for release.
  void report(std::uint64_t output_tokens);
  std::uint64_t reported() const { return reported_; }
  void release(std::uint64_t output_tokens);

 private:
  Worker* worker_ = nullptr;
  bool gated_ = false;
  std::uint64_t id_ = 0;
  std::uint64_t reported_ = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession>, public DeferredWatches::Hook {
 public:
  HttpSession(Socket socket, Worker& worker, ProxyContext& ctx,
              ConnectionLimit::Permit permit = {});
  ~HttpSession();

  void start();
  // Graceful shutdown: an idle connection closes now; a busy one finishes its
  // current response (sent with Connection: close) and then closes.
  void begin_close();
  // Deadline passed: close both sockets now.
  void force_close();

 private:
  using error_code = boost::beast::error_code;
  // How the response body is framed towards the client.
  enum class Framing { kNone, kRaw, kChunked };

  enum class State { kIdle, kReadingRequest, kQueued, kProxying, kAnswering, kLingering, kClosed };

 public:
  // Flow control's decision for this session's request (on its thread).
  void on_decision(const flowcontrol::Decision& d);
  // The request enrolled by Worker::defer_watch is still open a tick later:
  // arm its client watch now (a no-op once the request has ended).
  void arm_deferred_watch();

 private:
  // Request side.
  void wait_for_request();
  void read_client();
  void on_client_read(error_code ec, std::size_t n);
  void parse_request();
  void handle_request();
  void admit(const protocol::OpenAIRequest& parsed);
  // A read on the client socket while the request waits or is proxied: EOF
  // means the client left (cancel the queued request, or stop the upstream).
  void watch_client();
  void stop_watching();
  // The client closed or reset its connection (a non-blocking peek).
  bool client_gone();
  void on_watch(error_code ec, std::uint64_t generation);
  // Ends a dispatched request's accounting: in-flight permit, and flow
  // control's completion (with the output tokens counted). Idempotent.
  void release_dispatch();
  // Starts the accounting of a request (its head parsed, or refused
  // before that).
  void begin_request(bool head_read);
  // Accounting of the request that ends now (metrics, access log); once
  // per request, whichever way it ends.
  void end_request(int status, std::string_view outcome);

  // Upstream side.
  // Sends the request to `endpoint` (the dispatcher's choice) if it may take
  // it (reserve()), else to the next one (try_next_endpoint()).
  void dispatch_to(int endpoint);
  // Takes an in-flight slot on `endpoint` if it is usable (not removed, down
  // or ejected) and, for a request flow control dispatched, has room by the
  // saturation detector counting the requests sluice has on it.
  bool reserve(int endpoint, std::chrono::steady_clock::time_point now);
  // With the slot taken: a pooled connection, else a new one.
  void send_to(int endpoint);
  // Passive health: the current endpoint failed (`what`, for the log).
  void record_endpoint_failure(const char* what);
  void connect_upstream();
  void on_connect(error_code ec);
  void write_upstream();
  // Copies `pieces` into `into` if there are several and they are small.
  bool coalesce(std::span<const boost::asio::const_buffer> pieces, std::string& into);
  void on_upstream_written(error_code ec, std::size_t n);
  void read_upstream();
  void on_upstream_read(error_code ec, std::size_t n);
  void on_interim_response();
  void build_client_head();
  void upstream_failed_before_response(error_code ec, const char* stage);
  void try_next_endpoint();

  // Relay.
  void on_client_header_written(error_code ec, std::size_t n);
  void relay_read();
  void write_to_client();
  void on_relay_read(error_code ec, std::size_t n);
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
  // The request's body (and its engine-priority copy) is no longer needed:
  // large buffers are freed and the body budget's charge given back.
  void release_request_body();

  // Answers generated by sluice itself.
  void answer(const flowcontrol::ErrorAnswer& a);
  void on_answer_written(error_code ec, std::size_t n);
  void close();
  void linger();
  void drain();

  Stream client_;
  boost::beast::flat_buffer client_buffer_;
  Worker& worker_;
  ProxyContext& ctx_;
  ConnectionLimit::Permit
      connection_permit_;  // one of server.maxConnections, for this session's life
  // The request's body bytes, charged to server.maxBufferedBodyBytes while
  // it is read and until the request ends.
  BodyBudget::Lease body_lease_;
  std::list<HttpSession*>::iterator registration_;
  State state_ = State::kIdle;
  bool closing_ = false;
  bool first_request_ = true;

  // Per-request state (reset between requests on the connection; the
  // strings keep their capacity).
  protocol::RequestHead request_;
  std::optional<protocol::ProxyRequestParser> request_parser_;
  protocol::Route route_ = protocol::Route::kUnknown;
  bool keep_alive_ = true;
  std::string request_id_;
  std::string upstream_head_;  // request line + headers sent to the endpoint
  // The body sent to the endpoint: the client's, or engine_body_ (with the
  // band's engine priority) for an endpoint that schedules by priority.
  const std::string* upstream_body_ = nullptr;
  std::string engine_body_;
  std::vector<bool> tried_;
  int endpoint_ = -1;
  datalayer::InFlightPermit permit_;
  std::unique_ptr<UpstreamConnection> upstream_;
  // An upstream connection dropped while an operation on it may still be
  // pending (the client left mid-write): its socket is closed, and the
  // object lives on with the session, whose handlers hold it, so a composed
  // write that resumes on it (a partial write's completion already queued)
  // finds it alive, fails at once and stops.
  std::unique_ptr<UpstreamConnection> dropped_upstream_;
  void drop_upstream();
  bool upstream_reused_ = false;
  bool retried_ = false;
  protocol::ResponseHead response_;
  std::optional<protocol::RelayResponseParser> response_parser_;
  std::string client_head_;  // status line + headers sent to the client
  bool client_head_sent_ = false;
  bool head_built_ = false;
  bool evicted_ = false;               // the dispatcher evicted this request in flight
  bool client_write_pending_ = false;  // a relay or interim write to the client is under way
  bool header_deadline_armed_ = false;
  bool body_deadline_armed_ = false;
  bool continue_sent_ = false;
  int interim_responses_ = 0;  // 1xx before the final response
  std::string interim_head_;   // a 1xx relayed to the client
  Framing framing_ = Framing::kRaw;
  std::array<boost::asio::const_buffer, 5> out_buffers_;
  // Small writes are copied into one buffer (proxy/http_session.cc,
  // kCoalesceBytes): one send() instead of a sendmsg() of several pieces.
  std::string coalesced_;
  char chunk_prefix_[24];
  std::size_t chunk_prefix_size_ = 0;
  std::string error_event_;
  // An SSE stream relayed chunked: the part of an event past a read's last
  // blank line is held back for the next read, so the client only ever
  // holds whole events (protocol/sse_events.h).
  protocol::SseEventHold sse_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> answer_;
  // Flow control.
  std::uint64_t cookie_ = 0;  // this request's id towards the dispatcher
  DispatchTicket ticket_;     // held once dispatched, until completed
  bool watching_ = false;
  // The watch saw bytes of a next request and went off: only a look at
  // the socket (client_gone) tells a close behind them.
  bool watch_saw_bytes_ = false;
  bool cancel_sent_ = false;  // the queued request's cancel went to the dispatcher
  std::uint64_t watch_generation_ = 0;
  // The scheduler's answer: fallbacks after the primary, header lines.
  std::array<std::int32_t, 3> fallbacks_{-1, -1, -1};
  std::uint32_t over_admission_ = 0;  // the decision's allowance past the detector
  // The decision's held headroom (flowcontrol::Decision::held_*).
  std::uint32_t held_reserve_ = 0;
  std::uint64_t held_reserve_tokens_ = 0;
  std::uint32_t held_endpoints_ = 0;
  std::string scheduler_request_headers_;
  std::string scheduler_response_headers_;
  std::string prompt_text_;  // scratch for prefix hashing (keeps capacity)
  protocol::OutputTokenCounter tokens_;
  // For end_request (strings keep their capacity between requests).
  bool request_open_ = false;
  std::chrono::steady_clock::time_point t_start_{};
  std::chrono::steady_clock::time_point t_dispatched_{};
  bool dispatched_ = false;
  bool head_unread_ = false;  // refused before its head was parsed: no method/path to log
  std::string model_;
  std::string flow_id_;
  int priority_ = 0;
  std::uint64_t input_tokens_ = 0;
  observe::ModelStats* model_stats_ = nullptr;  // set while counted as running
};

}  // namespace sluice::proxy
