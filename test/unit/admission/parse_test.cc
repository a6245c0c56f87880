// admission's reading-side checks without a socket or a thread: the route
// and method, draining, the body's content type, parse and model name. Each
// refusal's status, reason, code and message; the request as it was read.
#include "admission/parse.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::admission {
namespace {

namespace http = boost::beast::http;
using protocol::Route;

struct Fixture {
  Fixture() {
    head.method = http::verb::post;
    head.method_string = "POST";
    head.target = "/v1/chat/completions";
    head.content_type = "application/json";
    head.fairness_id = "team-a";
    head.objective = "interactive";
    context.max_model_bytes = 16;
  }
  Verdict route_check(Route route) {
    Request r(head, identity, route);
    return check_framing_and_route(r);
  }
  Verdict parse(std::string body) {
    head.body = std::move(body);
    Request r(head, identity, Route::kChatCompletions);
    return parse_inference_body(context, r, parsed);
  }
  // The head as the exchange read it: the checks change none of it.
  void expect_head_unchanged() const {
    EXPECT_EQ(head.target, "/v1/chat/completions");
    EXPECT_EQ(head.fairness_id, "team-a");
    EXPECT_EQ(head.objective, "interactive");
    EXPECT_EQ(identity.tenant, "");
  }
  protocol::RequestHead head;
  auth::Identity identity;
  ParseContext context;
  protocol::ParseResult parsed;
};

nlohmann::json error_of(const flowcontrol::ErrorAnswer& a) {
  return nlohmann::json::parse(a.body)["error"];
}

void expect_client_error(const Verdict& v, int status, const std::string& code,
                         const std::string& message) {
  ASSERT_FALSE(v.admitted());
  const flowcontrol::ErrorAnswer& a = v.answer();
  EXPECT_EQ(a.status, status);
  EXPECT_EQ(a.reason, "");  // the access log shows the code
  EXPECT_EQ(a.code, code);
  EXPECT_EQ(error_of(a)["code"], code);
  EXPECT_EQ(error_of(a)["type"], status >= 500 ? "server_error" : "invalid_request_error");
  EXPECT_EQ(error_of(a)["message"], message);
  EXPECT_EQ(a.retry_after_seconds, 0);
}

TEST(AdmissionParse, EachRouteGoesOnWithItsMethods) {
  Fixture f;
  for (Route r :
       {Route::kCompletions, Route::kChatCompletions, Route::kEmbeddings, Route::kResponses}) {
    f.head.method = http::verb::post;
    EXPECT_TRUE(f.route_check(r).admitted());
    f.head.method = http::verb::get;
    EXPECT_FALSE(f.route_check(r).admitted());
  }
  f.head.method = http::verb::get;
  EXPECT_TRUE(f.route_check(Route::kModels).admitted());
  for (auto m : {http::verb::get, http::verb::post, http::verb::put, http::verb::patch,
                 http::verb::delete_}) {
    f.head.method = m;
    EXPECT_TRUE(f.route_check(Route::kPassthrough).admitted());
  }
  f.expect_head_unchanged();
}

TEST(AdmissionParse, AnUnreadableTransferCodingIs501AndClosesTheConnection) {
  Fixture f;
  f.head.unsupported_transfer_coding = true;
  const Verdict v = f.route_check(Route::kUnknown);  // before the route
  expect_client_error(v, 501, "unsupported-transfer-coding",
                      "only Transfer-Encoding: chunked is supported");
  EXPECT_TRUE(v.answer().close_connection);
  f.expect_head_unchanged();
}

TEST(AdmissionParse, APathWithoutARouteIs404) {
  Fixture f;
  f.head.target = "/v2/unknown?x=1";
  const Verdict v = f.route_check(Route::kUnknown);
  expect_client_error(v, 404, "not-found", "no such path: /v2/unknown?x=1");
  EXPECT_FALSE(v.answer().close_connection);
}

TEST(AdmissionParse, AMethodTheRouteDoesNotTakeIs405) {
  Fixture f;
  f.head.method = http::verb::get;
  f.head.method_string = "GET";
  expect_client_error(f.route_check(Route::kChatCompletions), 405, "method-not-allowed",
                      "method GET is not allowed on /v1/chat/completions");
  f.head.method = http::verb::post;
  f.head.method_string = "POST";
  f.head.target = "/v1/models";
  expect_client_error(f.route_check(Route::kModels), 405, "method-not-allowed",
                      "method POST is not allowed on /v1/models");
  f.head.method = http::verb::trace;
  f.head.method_string = "TRACE";
  f.head.target = "/v1/other";
  expect_client_error(f.route_check(Route::kPassthrough), 405, "method-not-allowed",
                      "method TRACE is not allowed on /v1/other");
}

TEST(AdmissionParse, DrainingIs503WithRetryAfterAndACloseAndOtherwiseGoesOn) {
  EXPECT_TRUE(check_not_draining(false).admitted());
  const Verdict v = check_not_draining(true);
  ASSERT_FALSE(v.admitted());
  const flowcontrol::ErrorAnswer& a = v.answer();
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.reason, "draining");
  EXPECT_EQ(a.llmd_reason, "rejected-shutting-down");
  EXPECT_EQ(a.retry_after_seconds, 1);
  EXPECT_TRUE(a.close_connection);
  EXPECT_EQ(error_of(a)["code"], "draining");
  EXPECT_EQ(error_of(a)["type"], "server_error");
  EXPECT_EQ(error_of(a)["message"],
            "sluice is draining and admits no new requests; retry elsewhere");
}

TEST(AdmissionParse, AReadableBodyGoesOnParsed) {
  Fixture f;
  std::string prompt;
  f.context.prompt_text = &prompt;
  const Verdict v = f.parse(
      R"({"model":"llama-3-8b","max_tokens":7,"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_TRUE(v.admitted());
  ASSERT_TRUE(f.parsed.ok());
  EXPECT_EQ(f.parsed.request.model, "llama-3-8b");
  EXPECT_EQ(f.parsed.request.max_tokens, 7);
  EXPECT_NE(prompt.find("hi"), std::string::npos);  // collected for prefix hashing
  f.expect_head_unchanged();
}

TEST(AdmissionParse, AContentTypeOtherThanJsonIs400BeforeTheBodyIsParsed) {
  Fixture f;
  f.head.content_type = "text/plain";
  expect_client_error(f.parse(R"({"model":"m"})"), 400, "unsupported-content-type",
                      "Content-Type must be application/json");
  EXPECT_EQ(f.parsed.request.model, "");  // not parsed
  f.head.content_type = "application/json; charset=utf-8";
  EXPECT_TRUE(f.parse(R"({"model":"m"})").admitted());
}

TEST(AdmissionParse, ABodyTheParserRefusesIs400WithItsCodeAndMessage) {
  Fixture f;
  expect_client_error(f.parse("[1,2]"), 400, "invalid-json", "request body must be a JSON object");
  expect_client_error(f.parse(R"({"messages":[]})"), 400, "missing-model",
                      "request body must name a 'model'");
  const Verdict v = f.parse("{not json");
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().code, "invalid-json");
  EXPECT_EQ(v.answer().status, 400);
  f.expect_head_unchanged();
}

TEST(AdmissionParse, AModelNameTooLongOrWithControlCharactersIs400) {
  const std::string message = "'model' must be 1 to 16 bytes without control characters";
  Fixture f;
  expect_client_error(f.parse(R"({"model":"seventeen-bytes-xx"})"), 400, "invalid-model", message);
  expect_client_error(f.parse(R"({"model":"a\u0001b"})"), 400, "invalid-model", message);
  EXPECT_TRUE(f.parse(R"({"model":"sixteen-bytes-xx"})").admitted());  // exactly the limit
  f.expect_head_unchanged();
}

}  // namespace
}  // namespace sluice::admission
