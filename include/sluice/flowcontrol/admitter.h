// Admitters (llm-d's requestcontrol.Admitter): a last word on whether an
// arriving request may be queued at all, from the pool's load. Called on
// the dispatcher thread only (single writer), once per arriving request
// before it takes a queue slot; must not block and must not throw.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

class Admitter {
 public:
  virtual ~Admitter() = default;
  virtual std::string_view type() const = 0;
  // True to admit a request of `priority`. `pool` is the load of each
  // endpoint slot; an endpoint whose `gone` entry is non-zero has left the
  // pool and does not count (both spans have the same size).
  virtual bool admit(int priority, std::span<const EndpointLoad> pool,
                     std::span<const std::uint8_t> gone) = 0;
};

}  // namespace sluice::flowcontrol
