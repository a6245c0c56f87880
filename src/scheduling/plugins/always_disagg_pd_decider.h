// always-disagg-pd-decider (llm-d): a P/D decider that always disaggregates:
// every request whose decode endpoint was found also runs the prefill
// profile, whatever its length or cache state. No parameters. llm-d's
// context-length-aware P/D guide pairs it with disagg-profile-handler and
// lets context-length-aware choose among the prefill endpoints.
#pragma once

#include "scheduling/plugins/prefix_based_pd_decider.h"

namespace sluice::scheduling {

class AlwaysDisaggPdDecider final : public Plugin, public PdDecider {
 public:
  static constexpr std::string_view kType = "always-disagg-pd-decider";
  std::string_view type() const override { return kType; }
  bool disaggregate(CycleState&, const Request&, const Endpoint&) override { return true; }
};

}  // namespace sluice::scheduling
