// Displacement policies: which queued requests make room for a newcomer.
#pragma once

#include <memory>
#include <string>

#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

// lowest-band-newest-first (sluice's default): from the lowest band up,
// newest first, until the newcomer fits; the request that waited least
// loses the least.
class LowestBandNewestFirst final : public DisplacementPolicy {
 public:
  std::string_view type() const override { return "lowest-band-newest-first"; }
  std::vector<std::uint64_t> choose(const DisplacementView& view, int priority,
                                    std::uint64_t need_requests, std::uint64_t need_bytes) override;
};

}  // namespace sluice::flowcontrol
