// Admission's reading side: what the exchange read (the head, then the
// body) judged before anything else decides on it. The transfer coding, the
// path and its method; whether sluice admits anything now (draining); an
// inference body's content type, its parse (protocol::parse_openai_request,
// pure) and its model name. Reading the bytes stays the exchange's I/O; each
// check here is a function of what was read, and answers as today.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "admission/request.h"
#include "protocol/openai_request.h"

namespace sluice::admission {

// In order: a transfer coding sluice cannot read (501
// unsupported-transfer-coding, the connection closed: the body's end is
// unknown), a path with no route (404 not-found), a method the route does
// not take (405 method-not-allowed; inference routes POST, the others GET,
// passthrough GET, POST, PUT, PATCH and DELETE).
Verdict check_framing_and_route(const Request& r);

// Drained or shutting down (`draining`): nothing new is admitted, 503
// draining with Retry-After 1, the connection closed so that the client
// goes to another replica.
Verdict check_not_draining(bool draining);

// What parse_inference_body reads besides the request.
struct ParseContext {
  std::size_t max_model_bytes = 0;  // server.maxModelBytes
  // The caller's scratch for the prompt's text (prefix hashing), or null:
  // the prompt is not collected. Filled up to prompt_text_limit bytes.
  std::string* prompt_text = nullptr;
  std::size_t prompt_text_limit = SIZE_MAX;
};

// An inference request's body: in order, a Content-Type other than JSON
// (400 unsupported-content-type), a body the parser refuses (400 with the
// parser's code and message), a model name that is not 1 to
// max_model_bytes bytes without control characters (400 invalid-model).
// `parsed` holds the parse (its request whenever it went on); the body's
// bytes are parsed in place, as the exchange parsed them.
Verdict parse_inference_body(const ParseContext& c, Request& r, protocol::ParseResult& parsed);

}  // namespace sluice::admission
