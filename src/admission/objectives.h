// The objectives a request may name (config's `objectives:`), as the I/O
// threads read them per request: a name's priority and its TTL. An unknown
// name is priority 0 with no TTL of its own, as in GIE.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>

namespace sluice::admission {

struct ObjectiveInfo {
  int priority = 0;
  std::optional<std::chrono::nanoseconds> ttl;
};

using Objectives = std::unordered_map<std::string, ObjectiveInfo>;

}  // namespace sluice::admission
