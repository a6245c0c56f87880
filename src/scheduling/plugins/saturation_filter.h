// The saturation detectors as filters (GIE: utilization-detector and
// concurrency-detector are also Filters): listed in a profile, the detector
// plugin of that name drops the endpoints it says have no room, judged with
// its own parameters on the cycle's metrics and sluice's in-flight credit.
// utilization-detector fails open (if it would drop every endpoint it
// drops none), concurrency-detector does not — as GIE.
#pragma once

#include <memory>

#include "sluice/flowcontrol/policies.h"
#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class SaturationFilter final : public Plugin, public Filter {
 public:
  SaturationFilter(std::unique_ptr<flowcontrol::SaturationDetector> detector, bool fail_open)
      : detector_(std::move(detector)), fail_open_(fail_open) {}
  std::string_view type() const override { return detector_->type(); }
  void filter(CycleState& cycle, const Request& request,
              std::vector<const Endpoint*>& candidates) override;

 private:
  std::unique_ptr<flowcontrol::SaturationDetector> detector_;
  bool fail_open_;
  std::vector<const Endpoint*> kept_;
};

// The detector's view of one endpoint.
flowcontrol::EndpointLoad load_of(const Endpoint& e);

}  // namespace sluice::scheduling
