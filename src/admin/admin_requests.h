// The admin plane's request parsing, apart from its sockets (and from
// Beast), so it can be unit-tested and fuzzed: JSON bodies of PUT calls and
// query parameters. Every function answers bad input with a typed error
// reply and never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "registry/flow_registry.h"

namespace sluice::admin {

// One admin answer: a status and a JSON (or Prometheus text) body.
struct AdminReply {
  int status = 200;
  std::string body;
  std::optional<std::uint64_t> total = std::nullopt;  // a capped list: x-total-count
};

// {"error":{"message","code"}}, valid JSON whatever bytes `message` holds.
AdminReply error_reply(int status, std::string_view code, const std::string& message);

// `?limit=N` of a target: N, or `fallback` when absent; nullopt when it is
// not a whole number from 1 to `most`.
std::optional<std::size_t> limit_param(const std::string& target, std::size_t fallback,
                                       std::size_t most);

// A band's priority in a path (/admin/v1/bands/{priority}): a whole number
// in its one canonical spelling ("-3", "0", "12"; not "-0", "012", "+12").
std::optional<int> parse_priority(std::string_view text);

// PUT /admin/v1/flows/{id}: {weight, priority, maxQueued} merged into `o`;
// anything else is an error (in `error`) and nothing changes.
std::optional<registry::FlowOverride> parse_override(const std::string& body,
                                                     registry::FlowOverride o, AdminReply& error);

// PUT /admin/v1/bands/{priority}: fields merged into `c`; nothing else.
bool parse_band(const std::string& body, registry::BandConfig& c, AdminReply& error);

}  // namespace sluice::admin
