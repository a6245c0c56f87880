// Flow-control vocabulary shared by the registry, the controller and policy
// plugins (GIE's terms): a flow is {fairness id, priority}; the same id at two
// priorities is two flows. Higher priority = more important; negative =
// sheddable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "sluice/scheduling/request.h"

namespace sluice::flowcontrol {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

struct FlowKey {
  std::string id;
  int priority = 0;
  bool operator==(const FlowKey&) const = default;
};

struct FlowKeyHash {
  std::size_t operator()(const FlowKey& k) const noexcept {
    return std::hash<std::string>()(k.id) * 31u + std::hash<int>()(k.priority);
  }
};

// What policies see of a queued request. Owned by the registry; valid while
// the request is queued.
struct QueuedRequest {
  std::uint64_t id = 0;               // unique per request (the controller's ticket): its handle
  const FlowKey* flow = nullptr;      // the flow it is queued in (set by the registry)
  std::uint64_t sequence = 0;         // arrival order within the controller
  TimePoint received;                 // when the gateway had read the request
  TimePoint enqueued;                 // when it entered its queue
  std::optional<Duration> own_ttl;    // the request's own (header / objective)
  std::optional<Duration> ttl;        // effective TTL: the smallest that applies
  std::optional<TimePoint> deadline;  // enqueued + ttl; none = no TTL
  std::optional<TimePoint> slo_deadline;  // received + x-slo-ttft-ms
  std::uint64_t byte_size = 0;
  std::uint64_t input_tokens = 0;       // estimate
  std::uint64_t max_output_tokens = 0;  // 0 = unknown
  // What the scheduler needs (model, prefix hashes, session), built on the
  // I/O thread; null when the request was enqueued without it.
  std::shared_ptr<const scheduling::Request> scheduling;
};

}  // namespace sluice::flowcontrol
