// The typed outcome every request ends with, exactly once (DESIGN.md §3.1).
#pragma once

#include <string_view>

namespace sluice {

enum class QueueOutcome {
  kDispatched,
  kRejectedCapacity,
  kRejectedNoEndpoints,
  kRejectedOther,
  kEvictedTTL,
  kEvictedContextCancelled,
  kEvictedDisplaced,
  kEvictedOther,
  // Dispatched, then evicted in flight for a higher band (flowControl
  // eviction): the only outcome a dispatched request can still get.
  kEvictedPreempted,
};

inline constexpr int kQueueOutcomeCount = 9;

// The value of `x-gateway-inference-dropped-reason` (and the OpenAI error
// `code`) for an outcome; empty for Dispatched.
constexpr std::string_view dropped_reason(QueueOutcome o) {
  switch (o) {
    case QueueOutcome::kDispatched:
      return "";
    case QueueOutcome::kRejectedCapacity:
      return "rejected-capacity";
    case QueueOutcome::kRejectedNoEndpoints:
      return "rejected-no-endpoints";
    case QueueOutcome::kRejectedOther:
      return "rejected-other";
    case QueueOutcome::kEvictedTTL:
      return "evicted-ttl";
    case QueueOutcome::kEvictedContextCancelled:
      return "evicted-context-cancelled";
    case QueueOutcome::kEvictedDisplaced:
      return "evicted-displaced";
    case QueueOutcome::kEvictedOther:
      return "evicted-other";
    case QueueOutcome::kEvictedPreempted:
      return "evicted-preempted";
  }
  return "";
}

}  // namespace sluice
