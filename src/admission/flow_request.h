// Admission's last step before flow control: what flow control needs to
// queue the request, from its steering values, its objective, its parsed
// body and the caller's clock value. The flow (the fairness id, else
// default-flow), the priority (the objective's; an unknown one is 0, as in
// GIE), the TTL (the objective's, or a header's if shorter), the TTFT
// objective, and its size. The caller turns it into the dispatcher's
// request (the flow's table hash, the scheduler's request with its prefix
// hashes) and queues it: that stays I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "admission/objectives.h"
#include "admission/request.h"
#include "sluice/flowcontrol/types.h"

namespace sluice::admission {

struct FlowRequest {
  // The fairness id, else "default-flow": a view of r.head's (or a literal).
  std::string_view flow_id;
  int priority = 0;
  flowcontrol::TimePoint received{};  // the caller's clock value
  // The request's own TTL: the objective's, or the shorter of a header's
  // (x-gateway-inference-ttl-ms whole milliseconds, x-llm-d-inference-ttl a
  // Go duration; 0 is none of its own). The band's or default TTL still
  // bounds it, in the controller.
  std::optional<flowcontrol::Duration> ttl;
  std::optional<flowcontrol::Duration> slo_ttft;  // x-slo-ttft-ms, if a whole number
  std::uint64_t bytes = 0;                        // the body's
  std::uint64_t input_tokens = 0;                 // the body's estimate
  // The body's max_tokens (the largest output limit), clamped to [0, 2^24]
  // so in-flight token sums cannot overflow; it only sizes the request for
  // tokens-mode admission (the body goes as sent).
  std::uint64_t max_output_tokens = 0;
};

// Needs r.body. A TTL header that does not parse is 400 invalid-ttl; `out`
// is then partly written and must not be used.
Verdict build_flow_request(const Objectives& objectives, flowcontrol::TimePoint now,
                           const Request& r, FlowRequest& out);

}  // namespace sluice::admission
