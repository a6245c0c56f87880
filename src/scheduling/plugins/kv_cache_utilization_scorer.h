// kv-cache-utilization-scorer (GIE): 1 - KV-cache usage; an endpoint with a
// free cache scores 1, a full one 0.
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class KvCacheUtilizationScorer final : public Plugin, public ColumnScorer {
 public:
  static constexpr std::string_view kType = "kv-cache-utilization-scorer";
  std::string_view type() const override { return kType; }
  std::uint32_t columns_read() const override { return CandidateColumns::kKvUsage; }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override;
};

}  // namespace sluice::scheduling
