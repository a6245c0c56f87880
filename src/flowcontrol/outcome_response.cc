#include "flowcontrol/outcome_response.h"

namespace sluice::flowcontrol {

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs,
// no surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const std::size_t left = s.size() - i;
  const auto cont = [&](std::size_t k) { return (b(k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default:
        break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20) {
      out += "\\u00";
      out.push_back(hex[(u >> 4) & 0xf]);
      out.push_back(hex[u & 0xf]);
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      // Not UTF-8 (a Latin-1 byte in a header, say): JSON text must be, so
      // the byte becomes U+FFFD, as nlohmann's error_handler_t::replace does.
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out.push_back('"');
}

std::string openai_error_body(std::string_view message, std::string_view type,
                              std::string_view code) {
  std::string out;
  out.reserve(64 + message.size());
  out += "{\"error\":{\"message\":";
  append_json_string(out, message);
  out += ",\"type\":";
  append_json_string(out, type);
  out += ",\"code\":";
  if (code.empty())
    out += "null";
  else
    append_json_string(out, code);
  out += "}}";
  return out;
}

ErrorAnswer answer_for(QueueOutcome outcome, std::string_view detail) {
  ErrorAnswer a;
  a.reason = dropped_reason(outcome);
  a.code = a.reason;
  std::string_view message;
  std::string_view type = "server_error";
  switch (outcome) {
    case QueueOutcome::kRejectedCapacity:
      a.status = 429, a.retry_after_seconds = 1, type = "rate_limit_error";
      a.llmd_reason = "rejected-saturated";
      message = "request rejected: queue capacity exhausted";
      break;
    case QueueOutcome::kRejectedNoEndpoints:
      a.status = 503, a.retry_after_seconds = 1;
      a.llmd_reason = "rejected-no-endpoints";
      message = "no model server endpoint is available";
      break;
    case QueueOutcome::kRejectedOther:
      a.status = 503;
      message = "request rejected";
      break;
    case QueueOutcome::kEvictedTTL:
      a.status = 503, a.retry_after_seconds = 1;
      a.llmd_reason = "rejected-ttl-expired";
      message = "request waited longer than its TTL";
      break;
    case QueueOutcome::kEvictedDisplaced:
      a.status = 429, a.retry_after_seconds = 1, type = "rate_limit_error";
      a.llmd_reason = "evicted-priority";  // defined by llm-d, not yet used there
      message = "request displaced by higher-priority traffic";
      break;
    case QueueOutcome::kEvictedOther:
      a.status = 503;
      a.llmd_reason = "rejected-shutting-down";
      message = "request evicted: gateway shutting down";
      break;
    case QueueOutcome::kEvictedPreempted:
      a.status = 429, a.retry_after_seconds = 1, type = "rate_limit_error";
      a.llmd_reason = "evicted";
      message = "request evicted in flight for higher-priority traffic";
      break;
    case QueueOutcome::kDispatched:
    case QueueOutcome::kEvictedContextCancelled:
      a.status = 500;
      message = "internal error: no answer for this outcome";
      break;
  }
  a.body = openai_error_body(detail.empty() ? message : detail, type, a.reason);
  return a;
}

ErrorAnswer client_error(int status, std::string_view code, std::string_view message) {
  ErrorAnswer a;
  a.status = status;
  a.code = code;
  // A failure of the model server (502, 504) is not the client's fault.
  a.body =
      openai_error_body(message, status >= 500 ? "server_error" : "invalid_request_error", code);
  // Bodies we did not read (413) or headers we could not parse (431) leave the
  // connection in an unknown state: close it.
  a.close_connection = status == 413 || status == 431;
  return a;
}

}  // namespace sluice::flowcontrol
