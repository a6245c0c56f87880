#include "admission/parse.h"

#include <string>
#include <utility>

#include "protocol/routes.h"
#include "protocol/steering.h"

namespace sluice::admission {

using flowcontrol::client_error;

namespace {

namespace http = boost::beast::http;

bool method_allowed(protocol::Route route, http::verb method) {
  // Passthrough is forwarded unread: the methods of an HTTP API, not
  // CONNECT or TRACE.
  if (route == protocol::Route::kPassthrough)
    return method == http::verb::get || method == http::verb::post || method == http::verb::put ||
           method == http::verb::patch || method == http::verb::delete_;
  return protocol::is_inference(route) ? method == http::verb::post : method == http::verb::get;
}

}  // namespace

Verdict check_framing_and_route(const Request& r) {
  const protocol::RequestHead& head = r.head;
  if (head.unsupported_transfer_coding) {
    auto a = client_error(501, "unsupported-transfer-coding",
                          "only Transfer-Encoding: chunked is supported");
    a.close_connection = true;
    return Verdict::refuse(std::move(a));
  }
  if (r.route == protocol::Route::kUnknown)
    return Verdict::refuse(client_error(404, "not-found", "no such path: " + head.target));
  if (method_allowed(r.route, head.method)) return Verdict::go_on();
  return Verdict::refuse(
      client_error(405, "method-not-allowed",
                   "method " + head.method_string + " is not allowed on " + head.target));
}

Verdict check_not_draining(bool draining) {
  if (!draining) return Verdict::go_on();
  // Another replica can take it at once.
  flowcontrol::ErrorAnswer a;
  a.status = 503;
  a.reason = "draining";
  a.llmd_reason = "rejected-shutting-down";
  a.body = flowcontrol::openai_error_body(
      "sluice is draining and admits no new requests; retry elsewhere", "server_error", "draining");
  a.retry_after_seconds = 1;
  a.close_connection = true;
  return Verdict::refuse(std::move(a));
}

Verdict parse_inference_body(const ParseContext& c, Request& r, protocol::ParseResult& parsed) {
  if (!protocol::is_json_content_type(r.head.content_type))
    return Verdict::refuse(
        client_error(400, "unsupported-content-type", "Content-Type must be application/json"));
  parsed = protocol::parse_openai_request(r.head.body, c.prompt_text, c.prompt_text_limit);
  if (!parsed.ok())
    return Verdict::refuse(client_error(400, parsed.error_code, parsed.error_message));
  if (!protocol::is_valid_model_name(parsed.request.model, c.max_model_bytes))
    return Verdict::refuse(client_error(400, "invalid-model",
                                        "'model' must be 1 to " +
                                            std::to_string(c.max_model_bytes) +
                                            " bytes without control characters"));
  return Verdict::go_on();
}

}  // namespace sluice::admission
