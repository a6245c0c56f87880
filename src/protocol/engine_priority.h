// Engine priority: the request body as an endpoint that schedules by
// priority (vLLM --scheduling-policy priority) gets it, with sluice's value
// of the top-level "priority" member and never the client's own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::protocol {

// vLLM's priority for a band: lower is served first there, higher here.
constexpr std::int64_t engine_priority_for_band(int band_priority) {
  return -static_cast<std::int64_t>(band_priority);
}

// `body` (a JSON object, already parsed and valid) with every top-level
// member whose key is "priority" (compared after unescaping, so
// "priorit\u0079" counts) removed and "priority": `priority` put first.
// Everything else is copied byte for byte: nothing is re-serialized.
std::string body_with_priority(std::string_view body, std::int64_t priority);

}  // namespace sluice::protocol
