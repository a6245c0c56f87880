// Engine priority: the request body as an endpoint that schedules by
// priority (vLLM --scheduling-policy priority) gets it, with sluice's value
// of the top-level "priority" member and never the client's own.
#pragma once

#include <cstdint>
#include <span>
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

// The same for any member: every top-level member whose key is one of
// `drop` removed, and "`key`": `value` put first. A tenant's max_tokens
// ceiling is written this way (auth/tenants.h).
std::string body_with_member(std::string_view body, std::span<const std::string_view> drop,
                             std::string_view key, std::int64_t value);

// The same with several members put first, in the order given.
struct Member {
  std::string_view key;
  std::int64_t value = 0;
};
std::string body_with_members(std::string_view body, std::span<const std::string_view> drop,
                              std::span<const Member> put);

}  // namespace sluice::protocol
