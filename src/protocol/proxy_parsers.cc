#include "protocol/proxy_parsers.h"

#include <algorithm>

#include "protocol/openai_request.h"

namespace sluice::protocol {

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

bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Removes from a "Name: value\r\n" block every field named in a Connection
// header's comma-separated options (RFC 9110 §7.6.1: they are hop-by-hop
// for this connection only and must not be forwarded).
void strip_connection_options(std::string& headers, std::string_view options) {
  std::string out;
  out.reserve(headers.size());
  std::string_view rest = headers;
  while (!rest.empty()) {
    const auto eol = rest.find("\r\n");
    const std::string_view line =
        rest.substr(0, eol == std::string_view::npos ? rest.size() : eol + 2);
    rest.remove_prefix(line.size());
    const std::string_view name = line.substr(0, line.find(':'));
    bool named = false;
    std::string_view opts = options;
    while (!opts.empty() && !named) {
      const auto comma = opts.find(',');
      std::string_view token = opts.substr(0, comma);
      opts = comma == std::string_view::npos ? std::string_view() : opts.substr(comma + 1);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
        token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      named = !token.empty() && iequals(token, name);
    }
    if (!named) out.append(line.data(), line.size());
  }
  headers.swap(out);
}

// Transfer-Encoding the proxy can decode: exactly "chunked" (any case,
// optional whitespace). "gzip, chunked" and the like would hand a coded body
// to the JSON reader as if it were plain.
bool is_plain_chunked(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return iequals(v, "chunked");
}

void note_connection_options(std::string& options, boost::beast::string_view value) {
  for (char c : value)
    if (!is_tchar(c) && c != ',' && c != ' ' && c != '\t') return;  // not a token list: ignore
  if (!options.empty()) options += ',';
  options.append(value.data(), value.size());
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
  ttl_duration.clear();
  slo_ttft_ms.clear();
  fairness_id_llmd = objective_llmd = slo_ttft_llmd = false;
  steering_seen = 0;
  repeated_steering.clear();
  session_token.clear();
  authorization.clear();
  authorization_count = 0;
  authorization_lines.clear();
  connection_options.clear();
  unsupported_transfer_coding = false;
  expect_continue = false;
  // A connection that once carried a huge body should not pin that memory.
  if (body.capacity() > kKeptBodyCapacity) std::string().swap(body);
  body.clear();
}

void ProxyRequestParser::on_request_impl(http::verb method, string_view method_str,
                                         string_view target, int version, error_code&) {
  head_.method = method;
  head_.method_string.assign(method_str.data(), method_str.size());
  head_.target.assign(target.data(), target.size());
  head_.version = static_cast<unsigned>(version);
}

// Steering headers and the request id (which sluice sets itself).
bool ProxyRequestParser::take_steering(string_view name_string, string_view value) {
  if (name_string.size() <= 2 || (name_string[0] != 'x' && name_string[0] != 'X')) return false;
  std::string* capture = nullptr;
  // An llm-d name, then its deprecated alias: the alias is taken only
  // while the llm-d name has not been seen.
  auto llmd = [&](std::string& field, bool& seen) {
    seen = true;
    capture = &field;
  };
  auto alias = [&](std::string& field, bool seen) {
    if (seen) return true;  // dropped: the x-llm-d-* value stands
    capture = &field;
    return false;
  };
  // Each steering name at most once: which of two copies steers is
  // anyone's guess (a proxy in front may join them, or keep either),
  // so a repeated one refuses the request (RequestHead).
  auto once = [&](std::uint8_t bit) {
    if (head_.steering_seen & bit) {
      if (head_.repeated_steering.empty())
        head_.repeated_steering.assign(name_string.data(), name_string.size());
      return false;
    }
    head_.steering_seen |= bit;
    return true;
  };
  if (iequals(name_string, "x-request-id")) {
    capture = &head_.request_id;
  } else if (iequals(name_string, "x-llm-d-inference-fairness-id")) {
    if (!once(1)) return true;
    llmd(head_.fairness_id, head_.fairness_id_llmd);
  } else if (iequals(name_string, "x-gateway-inference-fairness-id")) {
    if (!once(2) || alias(head_.fairness_id, head_.fairness_id_llmd)) return true;
  } else if (iequals(name_string, "x-llm-d-inference-objective")) {
    if (!once(4)) return true;
    llmd(head_.objective, head_.objective_llmd);
  } else if (iequals(name_string, "x-gateway-inference-objective")) {
    if (!once(8) || alias(head_.objective, head_.objective_llmd)) return true;
  } else if (iequals(name_string, "x-gateway-inference-ttl-ms")) {
    if (!once(16)) return true;
    capture = &head_.ttl_ms;
  } else if (iequals(name_string, "x-llm-d-inference-ttl")) {
    if (!once(128)) return true;
    capture = &head_.ttl_duration;
  } else if (iequals(name_string, "x-llm-d-slo-ttft-ms")) {
    if (!once(32)) return true;
    llmd(head_.slo_ttft_ms, head_.slo_ttft_llmd);
  } else if (iequals(name_string, "x-slo-ttft-ms")) {
    if (!once(64) || alias(head_.slo_ttft_ms, head_.slo_ttft_llmd)) return true;
  } else if (iequals(name_string, "x-session-token")) {
    capture = &head_.session_token;
  } else if (iequals(name_string, "x-prefiller-host-port") ||
             iequals(name_string, "x-data-parallel-host-port")) {
    return true;  // set by the scheduler only (P/D, data parallelism): a client's copy is dropped
  }
  if (!capture) return false;
  capture->assign(value.data(), value.size());
  return true;
}

void ProxyRequestParser::on_field_impl(http::field name, string_view name_string, string_view value,
                                       error_code& ec) {
  // A chunked body's trailer: dropped. Its fields would otherwise be
  // forwarded (or steer the request) outside the header limit.
  if (is_header_done()) return;
  // One Content-Length, one number: a list ("26, 26") or a second field,
  // even of the same value, is a length another parser may read otherwise
  // (RFC 9112 §6.3 lets a recipient refuse both).
  if (name == http::field::content_length) {
    if (content_length_seen_ || value.find(',') != string_view::npos) {
      ec = http::error::bad_content_length;
      return;
    }
    content_length_seen_ = true;
  }
  if (name == http::field::connection) note_connection_options(head_.connection_options, value);
  if (name == http::field::transfer_encoding && !is_plain_chunked(value))
    head_.unsupported_transfer_coding = true;
  if (is_hop_or_framing(name)) return;
  switch (name) {
    case http::field::host:
      return;  // replaced by the endpoint's address
    case http::field::expect:
      head_.expect_continue = iequals(value, "100-continue");
      return;
    case http::field::proxy_authorization:
      return;
    case http::field::authorization:
      if (head_.authorization_count++ == 0) head_.authorization.assign(value.data(), value.size());
      if (head_.authorization_count > 2) head_.authorization_count = 2;
      append_field(head_.authorization_lines, name_string, value);
      return;
    case http::field::content_type:
      head_.content_type.assign(value.data(), value.size());
      break;
    case http::field::unknown:
      if (take_steering(name_string, value)) return;
      break;
    default:
      break;
  }
  append_field(head_.forward_headers, name_string, value);
}

void ProxyRequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                           error_code&) {
  // With room for the JSON parser's padding: reserving it later would copy
  // the whole body once more. At most 1 MiB ahead of the bytes: a length
  // announced is not memory taken (under strict overcommit 10 000 announced
  // 8 MB bodies would fail an allocation); a larger body grows as it comes.
  constexpr std::uint64_t kMaxReserveAhead = 1u << 20;
  if (content_length)
    head_.body.reserve(static_cast<std::size_t>(std::min(*content_length, kMaxReserveAhead)) +
                       kJsonParserPadding);
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
  connection_options.clear();
  unsupported_transfer_coding = false;
  is_sse = false;
  body.clear();
}

void RelayResponseParser::on_response_impl(int code, string_view reason, int, error_code&) {
  head_.status = code;
  head_.reason.assign(reason.data(), reason.size());
}

void RelayResponseParser::on_field_impl(http::field name, string_view name_string,
                                        string_view value, error_code&) {
  if (is_header_done()) return;  // a trailer: not relayed (nor made a header)
  if (name == http::field::connection) note_connection_options(head_.connection_options, value);
  if (name == http::field::transfer_encoding && !is_plain_chunked(value))
    head_.unsupported_transfer_coding = true;
  if (is_hop_or_framing(name)) return;
  if (name == http::field::content_type) {
    head_.is_sse = value.size() >= 17 && iequals(value.substr(0, 17), "text/event-stream");
  } else if (name == http::field::unknown &&
             (iequals(name_string, "x-request-id") || iequals(name_string, "x-session-token") ||
              iequals(name_string, "x-llm-d-flow-queue-duration-ms") ||
              (name_string.size() >= 10 && iequals(name_string.substr(0, 10), "x-gateway-")))) {
    // sluice's own: the request id, the serving endpoint, the session token,
    // a drop reason, the time flow control held the request. An endpoint
    // cannot speak for sluice.
    return;
  } else if (own_rate_limits_ && name == http::field::unknown && name_string.size() >= 12 &&
             iequals(name_string.substr(0, 12), "x-ratelimit-")) {
    return;
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

}  // namespace sluice::protocol

namespace sluice::protocol {

void ProxyRequestParser::on_header_impl(error_code&) {
  if (!head_.connection_options.empty())
    strip_connection_options(head_.forward_headers, head_.connection_options);
}

void RelayResponseParser::on_header_impl(error_code&) {
  if (!head_.connection_options.empty())
    strip_connection_options(head_.forward_headers, head_.connection_options);
}

}  // namespace sluice::protocol
