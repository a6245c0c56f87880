// Admission as a sequence of pure steps (issue 41, item 0): identity →
// tenant policy → quota reserve → (later) pool → flow control. Each step is
// a function of the request value below and a read-only context; it
// returns a Verdict: go on with the request (enriched in place), or the
// typed answer sluice gives instead. No step reads a socket, a thread, a
// lock or the clock: proxy::Exchange builds the value from its members,
// calls the steps in order, takes what they decide the request needs from
// shared state (a tenant's concurrency permit) and renders the answers.
// So each step is unit-tested without sockets or threads, on a fake clock.
#pragma once

#include <optional>
#include <utility>

#include "auth/authenticator.h"
#include "flowcontrol/outcome_response.h"
#include "protocol/openai_request.h"
#include "protocol/proxy_parsers.h"
#include "protocol/routes.h"

namespace sluice::admission {

// One request as admission sees it. A view: the storage is the exchange's,
// reused across its connection's requests (the strings keep their
// capacity), so a step allocates no more than the same check did inside
// the exchange.
struct Request {
  Request(protocol::RequestHead& h, auth::Identity& id,
          protocol::Route rt = protocol::Route::kUnknown, protocol::OpenAIRequest* b = nullptr)
      : head(h), identity(id), route(rt), body(b) {}
  // The parsed head and the body's bytes. The steps rewrite the steering
  // values (fairness id, objective) and the body (a tenant's max_tokens).
  protocol::RequestHead& head;
  // Who sent it: settled by identify().
  auth::Identity& identity;
  protocol::Route route = protocol::Route::kUnknown;
  // The parsed body; null before it is read (identify). A passthrough
  // request's is empty but for its input estimate (its body is not read).
  protocol::OpenAIRequest* body = nullptr;
};

// What a step says: go on (the request, enriched in place), or answer.
// Going on holds nothing (no allocation); an answer's strings are built
// only on a refusal.
class [[nodiscard]] Verdict {
 public:
  Verdict() = default;  // go on
  static Verdict go_on() { return Verdict(); }
  static Verdict refuse(flowcontrol::ErrorAnswer a) {
    Verdict v;
    v.answer_.emplace(std::move(a));
    return v;
  }
  bool admitted() const { return !answer_.has_value(); }
  // Only when !admitted().
  const flowcontrol::ErrorAnswer& answer() const { return *answer_; }

 private:
  std::optional<flowcontrol::ErrorAnswer> answer_;
};

}  // namespace sluice::admission
