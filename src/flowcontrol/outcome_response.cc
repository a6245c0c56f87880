#include "flowcontrol/outcome_response.h"

namespace sluice::flowcontrol {

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out.push_back(hex[(c >> 4) & 0xf]);
          out.push_back(hex[c & 0xf]);
        } else {
          out.push_back(c);
        }
    }
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
      message = "request rejected: queue capacity exhausted";
      break;
    case QueueOutcome::kRejectedNoEndpoints:
      a.status = 503, a.retry_after_seconds = 1;
      message = "no model server endpoint is available";
      break;
    case QueueOutcome::kRejectedOther:
      a.status = 503;
      message = "request rejected";
      break;
    case QueueOutcome::kEvictedTTL:
      a.status = 503, a.retry_after_seconds = 1;
      message = "request waited longer than its TTL";
      break;
    case QueueOutcome::kEvictedDisplaced:
      a.status = 429, a.retry_after_seconds = 1, type = "rate_limit_error";
      message = "request displaced by higher-priority traffic";
      break;
    case QueueOutcome::kEvictedOther:
      a.status = 503;
      message = "request evicted: gateway shutting down";
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
  a.body = openai_error_body(message, "invalid_request_error", code);
  // Bodies we did not read (413) or headers we could not parse (431) leave the
  // connection in an unknown state: close it.
  a.close_connection = status == 413 || status == 431;
  return a;
}

}  // namespace sluice::flowcontrol
