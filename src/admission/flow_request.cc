#include "admission/flow_request.h"

#include <algorithm>
#include <chrono>

#include "config/units.h"
#include "protocol/steering.h"

namespace sluice::admission {

using flowcontrol::client_error;

namespace {

// The shorter of the TTL so far and the request's own headers'.
Verdict header_ttl(const protocol::RequestHead& head, std::optional<flowcontrol::Duration>& ttl) {
  if (!head.ttl_ms.empty()) {
    std::uint64_t ms = 0;
    if (!protocol::parse_whole_ms(head.ttl_ms, ms))
      return Verdict::refuse(client_error(
          400, "invalid-ttl", "x-gateway-inference-ttl-ms must be a whole number of milliseconds"));
    // 0 is no TTL of the request's own, as 0 is in the config.
    const flowcontrol::Duration header = std::chrono::milliseconds(ms);
    if (ms > 0 && (!ttl || header < *ttl)) ttl = header;
  }
  if (!head.ttl_duration.empty()) {
    // llm-d's header, a Go duration ("1500ms", "2m30s"): it can only
    // shorten the wait; 0 is no TTL of the request's own.
    const auto d = config::parse_duration(head.ttl_duration);
    if (!d)
      return Verdict::refuse(
          client_error(400, "invalid-ttl",
                       "x-llm-d-inference-ttl must be a non-negative Go duration such as "
                       "1500ms or 2m30s"));
    if (d->count() > 0 && (!ttl || *d < *ttl)) ttl = *d;
  }
  return Verdict::go_on();
}

}  // namespace

Verdict build_flow_request(const Objectives& objectives, flowcontrol::TimePoint now,
                           const Request& r, FlowRequest& out) {
  const protocol::RequestHead& head = r.head;
  const protocol::OpenAIRequest& body = *r.body;
  out.flow_id = head.fairness_id.empty() ? std::string_view("default-flow")
                                         : std::string_view(head.fairness_id);
  out.priority = 0;
  out.ttl.reset();
  if (!head.objective.empty()) {
    if (const auto it = objectives.find(head.objective); it != objectives.end()) {
      out.priority = it->second.priority;
      out.ttl = it->second.ttl;
    }
  }
  if (Verdict v = header_ttl(head, out.ttl); !v.admitted()) return v;
  out.slo_ttft.reset();
  std::uint64_t slo_ms = 0;
  if (protocol::parse_whole_ms(head.slo_ttft_ms, slo_ms))
    out.slo_ttft = std::chrono::milliseconds(slo_ms);
  out.received = now;
  out.bytes = head.body.size();
  out.input_tokens = body.estimated_input_tokens;
  static constexpr std::int64_t kMaxChargedOutputTokens = 1 << 24;
  out.max_output_tokens = static_cast<std::uint64_t>(
      std::clamp<std::int64_t>(body.max_tokens.value_or(0), 0, kMaxChargedOutputTokens));
  return Verdict::go_on();
}

}  // namespace sluice::admission
