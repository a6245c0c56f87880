// The relay: the endpoint's answer to the client as it comes, a read at a
// time (never buffered whole), in the client's framing, SSE events whole;
// its end (served, failed mid-way with an error event, evicted in flight).
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>

#include "admission/quota.h"
#include "observe/log.h"
#include "protocol/stream_usage.h"
#include "proxy/client_connection.h"
#include "proxy/exchange.h"
#include "proxy/reactor_hint.h"
#include "proxy/wire.h"

namespace sluice::proxy {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using flowcontrol::client_error;

// An answer's bytes came (or the endpoint's end, or an error): parsed, the
// head built once, the body's tokens counted and relayed.
void Exchange::on_upstream_read(error_code ec, std::size_t n) {
  if (up_.conn) HintedReads::read_done(*up_.conn);
  if (closed()) return;  // the client left meanwhile
  if (phase_ == Phase::kEvicted) return finish_evicted();
  auto& p = *relay_.parser;
  // The part of an SSE event held back from the last read goes first.
  const std::size_t held = take_held_event();
  if (ec == net::error::eof && p.got_some()) {
    // A body delimited by the connection's end is complete now.
    p.put_eof(ec);
  } else if (!ec) {
    parse_response(ec, n);
  }
  if (ec) {
    if (phase_ == Phase::kCalling)
      return upstream_failed_before_response(ec, "reading the response");
    return upstream_failed_mid_response(ec);
  }
  if (!p.is_header_done()) return read_upstream();
  // An unfinished chunk-size line or trailer is all that stays buffered past
  // the head (Beast 1.81 bounds neither): an endpoint sending an endless
  // one is an upstream error, not memory.
  if (!p.is_done() && up_.conn->buffer.size() > wire::kMaxResponseHeadBytes) {
    const error_code overflow = http::error::buffer_overflow;
    if (phase_ == Phase::kCalling)
      return upstream_failed_before_response(overflow, "reading the response");
    return upstream_failed_mid_response(overflow);
  }
  if (phase_ == Phase::kCalling && relay_.response.status / 100 == 1) return on_interim_response();
  if (phase_ == Phase::kCalling && relay_.response.unsupported_transfer_coding)
    return upstream_failed_before_response(http::error::bad_transfer_encoding,
                                           "reading the response (unsupported transfer coding)");
  if (phase_ == Phase::kCalling) build_client_head();
  relay_what_came(held);
}

std::size_t Exchange::take_held_event() {
  if (!relay_.sse.holding()) return 0;
  if (relay_.response.body.empty()) relay_.response.body.swap(thread_.relay_body());
  return relay_.sse.take(relay_.response.body);
}

// This read's `n` bytes, parsed; the body into the thread's buffer, in
// cache from the last relayed read (given back in on_relay_written).
void Exchange::parse_response(error_code& ec, std::size_t n) {
  auto& p = *relay_.parser;
  up_.conn->buffer.commit(n);
  if (relay_.response.body.empty()) relay_.response.body.swap(thread_.relay_body());
  while (up_.conn->buffer.size() > 0 && !p.is_done()) {
    std::size_t used = p.put(up_.conn->buffer.data(), ec);
    up_.conn->buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
  }
  if (!ec) hint_next_read(n);
}

// The read that ended a keep-alive answer, short (the socket drained) and
// with nothing past it: the connection's next read is the next answer's,
// which cannot be there before the next request is written. It waits for
// readiness rather than trying a receive that fails (proxy/reactor_hint.h).
// Here, in the completion of that read, and not when the client has been
// written to, so that a close from the endpoint in between is not the event
// the hint forgets. (n > 0: a real read; the parse of buffered bytes after
// a 1xx comes here with 0, after the interim head was written to the
// client, and bytes that came meanwhile have had their event.)
void Exchange::hint_next_read(std::size_t n) {
  auto& p = *relay_.parser;
  // Not under TLS: the socket's readiness is not the session's (a record
  // may be buffered in OpenSSL), so TLS reads are plain reads.
  if (n == 0 || n >= wire::kRelayReadSize || !p.keep_alive() || up_.conn->stream.tls()) return;
  if (p.is_done() && up_.conn->buffer.size() == 0) {
    skip_next_speculative_read(up_.conn->stream.socket());
  } else if (!p.is_done() && p.is_header_done() && (p.chunked() || p.content_length())) {
    // A short read in the middle of a framed body (a stream between two
    // events): the next read waits for readiness too, and the connection
    // is watched for a close that came with these bytes
    // (proxy/hinted_reads.h). Not for a body that ends with the connection
    // (there that close is the answer's end), nor on a connection that
    // will not be reused (the watch's registration is paid once per
    // connection).
    thread_.hint_read(*up_.conn);
  }
}

// The body bytes past the `held` part: tokens counted (and charged to the
// flow every 16, VTC), an SSE event's unfinished part held back, and a
// write when there is something to send: the head (at once, so a
// streaming client sees the response start before the first token;
// together with the body when it came in the same read), body bytes, or
// the end.
void Exchange::relay_what_came(std::size_t held) {
  auto& p = *relay_.parser;
  if (relay_.response.body.size() > held) {
    if (rec_.first_byte == std::chrono::steady_clock::time_point{}) {
      // The first body bytes: time to first token (llm-d's TTFT), and
      // prefill done for inflight-load-producer.
      rec_.first_byte = std::chrono::steady_clock::now();
      rec_.streaming = relay_.response.is_sse;
      if (ticket_) ticket_.started();
    }
    tokens_.feed(std::string_view(relay_.response.body).substr(held));
    if (ticket_ && tokens_.tokens() >= ticket_.reported() + 16) ticket_.report(tokens_.tokens());
  }
  if (relay_.response.is_sse && relay_.framing == Framing::kChunked && !p.is_done())
    relay_.sse.hold(relay_.response.body, held, ctx_.config.server.sse_event_hold_bytes);
  // The usage event sluice asked for on the client's behalf (counted
  // above): not the client's to see.
  if (quota_.usage_asked && relay_.response.is_sse && relay_.framing == Framing::kChunked)
    protocol::drop_usage_events(relay_.response.body, relay_.response.body.size());
  if (!relay_.head_sent || !relay_.response.body.empty() || p.is_done()) return write_to_client();
  up_.conn->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  read_upstream();
}

void Exchange::build_client_head() {
  phase_ = Phase::kRelaying;
  relay_.sse.reset();
  // The answer has begun: the request will not be sent again (no retry
  // after a response byte), so its body goes, and its charge.
  release_request_body();
  auto& p = *relay_.parser;
  const int status = relay_.response.status;
  const bool bodyless = status / 100 == 1 || status == 204 || status == 304;

  relay_.framing = choose_framing(bodyless);
  keep_alive_ = keep_alive_ && !conn_.closing_;

  auto& h = relay_.client_head;
  h.clear();
  h += request_.version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  wire::append_number(h, static_cast<std::uint64_t>(status));
  h += ' ';
  if (relay_.response.reason.empty()) {
    auto r = http::obsolete_reason(static_cast<http::status>(status));
    h.append(r.data(), r.size());
  } else {
    h += relay_.response.reason;
  }
  h += "\r\n";
  h += relay_.response.forward_headers;
  h += "x-gateway-destination-endpoint-served: ";
  h += ctx_.endpoints.at(up_.endpoint).config.address;
  h += "\r\nx-request-id: ";
  h += request_id_;
  h += "\r\n";
  if (rec_.queued && rec_.dispatched) {
    // llm-d's: whole milliseconds from enqueue to dispatch, before the first
    // token; absent when flow control did not hold the request.
    h += "x-llm-d-flow-queue-duration-ms: ";
    wire::append_number(
        h, static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          rec_.dispatched_at - rec_.enqueued_at)
                                          .count()));
    h += "\r\n";
  }
  h += up_.response_headers;
  // quota.headers: always: OpenAI's x-ratelimit-* of the tightest limits,
  // as they stood once this request's worst case was held.
  if (quota_.headers) admission::append_rate_limit_lines(quota_.headroom, h);
  if (relay_.framing == Framing::kRaw && (p.content_length() || p.is_done())) {
    h += "Content-Length: ";
    wire::append_number(h, p.content_length() ? *p.content_length() : relay_.response.body.size());
    h += "\r\n";
  } else if (relay_.framing == Framing::kChunked) {
    h += "Transfer-Encoding: chunked\r\n";
  } else if (relay_.framing == Framing::kNone && !bodyless) {
    h += "Content-Length: 0\r\n";
  }
  if (!keep_alive_)
    h += "Connection: close\r\n";
  else if (request_.version < 11)
    h += "Connection: keep-alive\r\n";
  h += "\r\n";
  relay_.head_sent = false;
}

// Framing towards the client: keep a Content-Length; re-chunk a chunked or
// close-delimited body for HTTP/1.1 clients (so the connection stays
// reusable); HTTP/1.0 clients get the raw body and a close.
Exchange::Framing Exchange::choose_framing(bool bodyless) {
  auto& p = *relay_.parser;
  if (p.content_length()) return Framing::kRaw;
  if (p.is_done() && (bodyless || relay_.response.body.empty())) return Framing::kNone;
  // A chunked (or close-delimited) body that came whole in the first
  // read: its length is known, and it must be framed by it — a
  // `Content-Length: 0` here would leave the body on the client's
  // connection to be read as its next response.
  if (p.is_done()) return Framing::kRaw;
  if (request_.version >= 11) return Framing::kChunked;
  keep_alive_ = false;
  return Framing::kRaw;
}

// Writes whatever is pending (the head if not yet sent, this read's body
// bytes in the client's framing, the final chunk when done) in one write.
void Exchange::write_to_client() {
  const bool done = relay_.parser->is_done();
  auto& buffers = relay_.out;  // a member: the write op keeps a view of it
  std::size_t count = 0;
  if (!relay_.head_sent) buffers[count++] = net::buffer(relay_.client_head);
  const auto& body = relay_.response.body;
  if (!body.empty()) {
    if (relay_.framing == Framing::kChunked) {
      // Once per relayed read: to_chars, not a printf per SSE event.
      char* end =
          std::to_chars(relay_.chunk_prefix, relay_.chunk_prefix + sizeof relay_.chunk_prefix - 2,
                        body.size(), 16)
              .ptr;
      *end++ = '\r';
      *end++ = '\n';
      relay_.chunk_prefix_size = static_cast<std::size_t>(end - relay_.chunk_prefix);
      buffers[count++] = net::buffer(relay_.chunk_prefix, relay_.chunk_prefix_size);
      buffers[count++] = net::buffer(body);
      buffers[count++] = net::buffer("\r\n", 2);
    } else {
      buffers[count++] = net::buffer(body);
    }
  }
  if (done && relay_.framing == Framing::kChunked) buffers[count++] = net::buffer("0\r\n\r\n", 5);
  const std::span<const net::const_buffer> pieces(buffers.data(), count);
  // Several small pieces are framed in one buffer: mid-body the thread's
  // (the exchange's own is not touched per event), else the exchange's.
  std::string& frame = done ? relay_.coalesced : thread_.relay_out();
  if (count == 1 || wire::coalesce(pieces, frame)) {
    net::const_buffer out = count == 1 ? buffers[0] : net::buffer(frame);
    // The send is tried here, in the completion that produced the bytes:
    // it almost always goes whole (a client keeps up), and saves a write
    // operation and its completion, a trip through the event loop. To a
    // TLS client too: the bytes are encrypted here and the ciphertext sent.
    error_code ec;
    const std::size_t sent = conn_.client_.try_send(out, ec);
    if (ec || (sent == out.size() && conn_.client_.flushed())) {
      // Mid-body the relay goes on at once. After the answer's last write
      // comes the read of the client's next request: started at once, its
      // receive would find nothing (+0.6 us per small request); after the
      // loop's round, as an operation's completion would run, it usually
      // finds the request there. (Measured with the last write sent at
      // once: 20.64 -> 20.17 us CPU per small request, 5 rounds.)
      if (!done) return on_relay_written(ec, sent);
      relay_.write_pending = true;
      net::post(conn_.client_.get_executor(),
                [self = guard(), ec, sent] { self->exchange_.on_relay_written(ec, sent); });
      return;
    }
    conn_.client_.expires_after(ctx_.config.server.client_write_timeout);
    relay_.write_pending = true;
    // TLS: all of it encrypted, part of the ciphertext waits for the
    // socket (the plaintext is no longer needed).
    if (sent == out.size()) return conn_.client_.async_flush(bind<&Exchange::on_relay_written>());
    // The rest is written by the operation, with the deadline. Framed in
    // the thread's buffer, it is copied to the exchange's (at most
    // kCoalesceBytes): the thread's serves its other connections meanwhile.
    // A single piece (the body, or the head) is the exchange's own until
    // the write completes.
    out += sent;
    if (&frame != &relay_.coalesced && count > 1) {
      relay_.coalesced.assign(static_cast<const char*>(out.data()), out.size());
      out = net::buffer(relay_.coalesced);
    }
    net::async_write(conn_.client_, out, bind<&Exchange::on_relay_written>());
    return;
  }
  conn_.client_.expires_after(ctx_.config.server.client_write_timeout);
  relay_.write_pending = true;
  net::async_write(conn_.client_, pieces, bind<&Exchange::on_relay_written>());
}

void Exchange::on_relay_written(error_code ec, std::size_t) {
  relay_.write_pending = false;
  if (closed()) return;  // the client left meanwhile
  if (ec) {
    SLUICE_LOG(kDebug, "session",
               "client write failed (" << ec.message() << "); closing upstream connection");
    drop_upstream();  // generation stops when the endpoint sees the close
    release_dispatch();
    return conn_.close();
  }
  relay_.head_sent = true;
  relay_.response.body.clear();
  // The thread's body buffer goes back to it (or, after a write that was
  // pending, the exchange's own takes its place: either way one owner each).
  relay_.response.body.swap(thread_.relay_body());
  if (relay_.parser->is_done()) return finish_response();  // done first: served
  if (phase_ == Phase::kEvicted) return finish_evicted();
  up_.conn->stream.expires_after(ctx_.config.server.upstream_idle_timeout);
  read_upstream();
}

void Exchange::upstream_failed_mid_response(error_code ec) {
  thread_.stats()
      .endpoint(static_cast<std::size_t>(up_.endpoint))
      .errors[static_cast<std::size_t>(ec == beast::error::timeout
                                           ? observe::UpstreamError::kTimeout
                                           : observe::UpstreamError::kMidResponse)] += 1;
  end_request(relay_.response.status,
              ec == beast::error::timeout ? "upstream-timeout" : "upstream-error");
  SLUICE_LOG_LIMITED(kWarn, "upstream",
                     "endpoint " << ctx_.endpoints.at(up_.endpoint).config.address
                                 << " failed mid-response: " << ec.message());
  up_.conn.reset();
  release_dispatch();
  keep_alive_ = false;
  // Tell an SSE client why its stream ends, then close without the final
  // chunk, so the transfer is visibly incomplete to any HTTP client.
  end_stream_with_error("model server failed mid-stream: " + ec.message(), "upstream-error", false);
}

void Exchange::end_stream_with_error(std::string_view message, std::string_view code,
                                     bool end_stream) {
  if (!relay_.response.is_sse || relay_.framing != Framing::kChunked) return conn_.close();
  // Only whole events reach the client: the part of one that came before
  // the end is dropped (with what was held back). A client holding part of
  // an event longer than the hold gets no error event (it would be read as
  // the rest of that event): the stream just ends, visibly incomplete, and
  // an SSE client discards the unfinished event.
  if (!relay_.sse.end(relay_.response.body)) return conn_.close();
  std::string event =
      "data: " + flowcontrol::openai_error_body(message, "server_error", code) + "\n\n";
  char prefix[24];
  int n = std::snprintf(prefix, sizeof prefix, "%zx\r\n", event.size());
  relay_.error_event.clear();
  if (!relay_.head_sent) relay_.error_event += relay_.client_head;
  if (!relay_.response.body.empty()) {
    char p2[24];
    int m = std::snprintf(p2, sizeof p2, "%zx\r\n", relay_.response.body.size());
    relay_.error_event.append(p2, static_cast<std::size_t>(m));
    relay_.error_event += relay_.response.body;
    relay_.error_event += "\r\n";
  }
  relay_.error_event.append(prefix, static_cast<std::size_t>(n));
  relay_.error_event += event;
  relay_.error_event += "\r\n";
  if (end_stream) relay_.error_event += "0\r\n\r\n";
  conn_.client_.expires_after(ctx_.config.server.client_write_timeout);
  net::async_write(conn_.client_, net::buffer(relay_.error_event),
                   [self = guard()](error_code, std::size_t) { self->close(); });
}

void Exchange::on_evicted(std::uint64_t ticket) {
  // Only the request still being proxied: one that finished (or whose
  // client left) has given its slot back already, which confirms the
  // eviction; a later request on this connection has another ticket.
  if (!(in(Phase::kCalling) || in(Phase::kRelaying)) || !ticket_ || ticket_.id() != ticket) return;
  phase_ = Phase::kEvicted;
  // A write to the client is under way: the slot is freed now (the engine
  // sees its connection close and stops), whatever the client's reading;
  // the write's handler then finishes the eviction (the error event).
  // Otherwise the upstream has an operation pending (connect, write or
  // read): cancelled, its handler does.
  if (relay_.write_pending) {
    drop_upstream();
    release_dispatch();
    return;
  }
  if (up_.conn) {
    up_.conn->stream.cancel();
    return;
  }
  finish_evicted();
}

void Exchange::finish_evicted() {
  SLUICE_LOG(kDebug, "session", "request " << request_id_ << " evicted in flight");
  // Closed, never pooled: the engine sees the connection end and frees the
  // sequence and its KV cache. The completion confirms the eviction.
  up_.conn.reset();
  release_dispatch();
  if (!relay_.head_sent) {
    // Nothing of the answer has reached the client: a typed answer.
    relay_.parser.reset();
    return answer(flowcontrol::answer_for(QueueOutcome::kEvictedPreempted));
  }
  end_request(relay_.response.status, "evicted-preempted");
  keep_alive_ = false;
  end_stream_with_error("request evicted in flight for higher-priority traffic",
                        "evicted-preempted", true);
}

void Exchange::finish_response() {
  // A whole response, whatever its status (a 5xx answered cleanly is the
  // model server's verdict, not a broken endpoint): the failure streak ends.
  ctx_.endpoints.at(static_cast<std::size_t>(up_.endpoint)).record_success();
  end_request(relay_.response.status, "served");
  release_dispatch();
  if (up_.conn) {
    // Bytes after the response (a second response, garbage) mean the
    // connection's framing cannot be trusted: never pooled, or the next
    // request would read them as its answer.
    if (relay_.parser->keep_alive() && up_.conn->buffer.size() == 0)
      thread_.pool().give_back(std::move(up_.conn));
    up_.conn.reset();
  }
  relay_.parser.reset();
  request_parser_.reset();
  conn_.first_request_ = false;
  if (!keep_alive_) return conn_.close_gracefully();
  conn_.wait_for_request();
}

}  // namespace sluice::proxy
