// lora-affinity-scorer (GIE): prefers endpoints that already run the
// requested LoRA adapter (the body's model): 1 if it is active there; 0.8
// if the endpoint has a free adapter slot (active + waiting < max); 0.6 if
// it is waiting to load there; else 0. An endpoint that reports no LoRA
// information at all scores 0, the same for every such endpoint.
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class LoraAffinityScorer final : public Plugin, public Scorer {
 public:
  static constexpr std::string_view kType = "lora-affinity-scorer";
  std::string_view type() const override { return kType; }
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) override;
};

}  // namespace sluice::scheduling
