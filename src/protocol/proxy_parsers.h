// HTTP parsers for the proxy path, built on Beast's basic_parser: instead of
// storing every field in a node-allocated container and serializing it again,
// they copy the headers that are forwarded straight into one flat buffer (the
// outgoing header block) and capture the few that sluice itself reads. The
// buffers live in the exchange and keep their capacity across requests, so a
// request costs no allocation per field.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string>

namespace sluice::protocol {

// A request-body buffer larger than this is not kept for a connection's
// next request (RequestHead::clear), nor among its I/O thread's spares
// (IoThread::give_back_body).
inline constexpr std::size_t kKeptBodyCapacity = 1u << 20;

// What the proxy keeps of a client request. Reused across the requests of a
// connection; clear() keeps capacity.
struct RequestHead {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string method_string;
  std::string target;
  unsigned version = 11;
  // "Name: value\r\n" for every field forwarded unchanged.
  std::string forward_headers;
  std::string content_type;
  std::string request_id;
  // Steering headers, read by sluice, never forwarded. llm-d's names
  // (x-llm-d-inference-fairness-id, x-llm-d-inference-objective,
  // x-llm-d-slo-ttft-ms) and their deprecated aliases (x-gateway-inference-
  // fairness-id, x-gateway-inference-objective, x-slo-ttft-ms) are both
  // accepted; as in llm-d, the x-llm-d-* name wins when both are present,
  // whatever their order.
  std::string fairness_id;
  std::string objective;
  std::string ttl_ms;        // x-gateway-inference-ttl-ms (sluice's, whole ms)
  std::string ttl_duration;  // x-llm-d-inference-ttl (llm-d's, a Go duration)
  std::string slo_ttft_ms;
  bool fairness_id_llmd = false, objective_llmd = false, slo_ttft_llmd = false;
  // Each steering name may come once: the first name sent twice (the
  // request is refused, 400 repeated-steering-header); the names seen.
  std::string repeated_steering;
  std::uint8_t steering_seen = 0;
  std::string session_token;  // x-session-token (session affinity)
  // Authorization: read by sluice (auth/authenticator.h), never forwarded
  // as it came; the exchange writes it to the endpoint only when sluice does
  // not authenticate (auth off, or a trusted proxy's request). The first
  // one, and how many came (two are refused); all of them as header lines,
  // for the endpoint.
  std::string authorization;
  std::uint8_t authorization_count = 0;
  std::string authorization_lines;
  // Options of Connection headers: fields named there are not forwarded.
  std::string connection_options;
  // Transfer-Encoding other than plain chunked (501: sluice cannot decode it).
  bool unsupported_transfer_coding = false;
  bool expect_continue = false;
  std::string body;

  void clear();
};

class ProxyRequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  explicit ProxyRequestParser(RequestHead& head) : head_(head) { head_.clear(); }

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;
  void on_request_impl(boost::beast::http::verb method, string_view method_str, string_view target,
                       int version, error_code& ec) override;
  void on_response_impl(int, string_view, int, error_code&) override {}
  // A steering header or the request id: true when the field is taken (or
  // dropped) here, false when it is forwarded.
  bool take_steering(string_view name_string, string_view value);
  void on_field_impl(boost::beast::http::field name, string_view name_string, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code&) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         error_code&) override;
  std::size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  RequestHead& head_;
  bool content_length_seen_ = false;
};

// What the proxy keeps of an upstream response. Body bytes parsed by each
// read are appended to `body` and relayed; the exchange clears it after each
// write, so at most one read's worth is held.
struct ResponseHead {
  int status = 0;
  std::string reason;
  std::string forward_headers;
  std::string connection_options;
  // Transfer-Encoding other than plain chunked: the body cannot be relayed.
  bool unsupported_transfer_coding = false;
  bool is_sse = false;
  std::string body;

  void clear();
};

class RelayResponseParser final : public boost::beast::http::basic_parser<false> {
 public:
  // `own_rate_limits`: sluice writes OpenAI's x-ratelimit-* of its own
  // quotas on this answer; the engine's are dropped (two sets would
  // disagree, and a client reads one).
  explicit RelayResponseParser(ResponseHead& head, bool own_rate_limits = false)
      : head_(head), own_rate_limits_(own_rate_limits) {
    head_.clear();
  }

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view reason, int version, error_code& ec) override;
  void on_field_impl(boost::beast::http::field name, string_view name_string, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code&) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  ResponseHead& head_;
  bool own_rate_limits_ = false;
};

}  // namespace sluice::protocol
