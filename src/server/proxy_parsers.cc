#include "server/proxy_parsers.h"

namespace sluice::server {

namespace http = boost::beast::http;
using boost::beast::iequals;

namespace {

// Hop-by-hop fields (RFC 9110 §7.6.1) and the framing fields the proxy
// re-creates itself on each side.
bool is_hop_or_framing(http::field f) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::upgrade:
    case http::field::transfer_encoding:
    case http::field::content_length:
      return true;
    default:
      return false;
  }
}

void append_field(std::string& out, boost::beast::string_view name,
                  boost::beast::string_view value) {
  out.append(name.data(), name.size());
  out.append(": ", 2);
  out.append(value.data(), value.size());
  out.append("\r\n", 2);
}

}  // namespace

void RequestHead::clear() {
  method = http::verb::unknown;
  method_string.clear();
  target.clear();
  version = 11;
  forward_headers.clear();
  content_type.clear();
  request_id.clear();
  fairness_id.clear();
  objective.clear();
  ttl_ms.clear();
  slo_ttft_ms.clear();
  session_token.clear();
  expect_continue = false;
  // A connection that once carried a huge body should not pin that memory.
  if (body.capacity() > (1u << 20)) std::string().swap(body);
  body.clear();
}

void ProxyRequestParser::on_request_impl(http::verb method, string_view method_str,
                                         string_view target, int version, error_code&) {
  head_.method = method;
  head_.method_string.assign(method_str.data(), method_str.size());
  head_.target.assign(target.data(), target.size());
  head_.version = static_cast<unsigned>(version);
}

void ProxyRequestParser::on_field_impl(http::field name, string_view name_string, string_view value,
                                       error_code&) {
  if (is_hop_or_framing(name)) return;
  switch (name) {
    case http::field::host:
      return;  // replaced by the endpoint's address
    case http::field::expect:
      head_.expect_continue = iequals(value, "100-continue");
      return;
    case http::field::proxy_authorization:
      return;
    case http::field::content_type:
      head_.content_type.assign(value.data(), value.size());
      break;
    case http::field::unknown: {
      // Steering headers and the request id (which sluice sets itself).
      if (name_string.size() > 2 && (name_string[0] == 'x' || name_string[0] == 'X')) {
        std::string* capture = nullptr;
        if (iequals(name_string, "x-request-id"))
          capture = &head_.request_id;
        else if (iequals(name_string, "x-gateway-inference-fairness-id"))
          capture = &head_.fairness_id;
        else if (iequals(name_string, "x-gateway-inference-objective"))
          capture = &head_.objective;
        else if (iequals(name_string, "x-gateway-inference-ttl-ms"))
          capture = &head_.ttl_ms;
        else if (iequals(name_string, "x-slo-ttft-ms"))
          capture = &head_.slo_ttft_ms;
        else if (iequals(name_string, "x-session-token"))
          capture = &head_.session_token;
        // Set by the scheduler only (P/D): a client's copy is dropped.
        else if (iequals(name_string, "x-prefiller-host-port"))
          return;
        if (capture) {
          capture->assign(value.data(), value.size());
          return;
        }
      }
      break;
    }
    default:
      break;
  }
  append_field(head_.forward_headers, name_string, value);
}

void ProxyRequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                           error_code&) {
  if (content_length) head_.body.reserve(static_cast<std::size_t>(*content_length));
}

std::size_t ProxyRequestParser::on_body_impl(string_view body, error_code&) {
  head_.body.append(body.data(), body.size());
  return body.size();
}

std::size_t ProxyRequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  head_.body.append(body.data(), body.size());
  return body.size();
}

void ResponseHead::clear() {
  status = 0;
  reason.clear();
  forward_headers.clear();
  is_sse = false;
  body.clear();
}

void RelayResponseParser::on_response_impl(int code, string_view reason, int, error_code&) {
  head_.status = code;
  head_.reason.assign(reason.data(), reason.size());
}

void RelayResponseParser::on_field_impl(http::field name, string_view name_string,
                                        string_view value, error_code&) {
  if (is_hop_or_framing(name)) return;
  if (name == http::field::content_type) {
    head_.is_sse = value.size() >= 17 && iequals(value.substr(0, 17), "text/event-stream");
  } else if (name == http::field::unknown &&
             (iequals(name_string, "x-request-id") ||
              iequals(name_string, "x-gateway-destination-endpoint-served"))) {
    return;  // sluice sets these
  }
  append_field(head_.forward_headers, name_string, value);
}

std::size_t RelayResponseParser::on_body_impl(string_view body, error_code&) {
  head_.body.append(body.data(), body.size());
  return body.size();
}

std::size_t RelayResponseParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  head_.body.append(body.data(), body.size());
  return body.size();
}

}  // namespace sluice::server
