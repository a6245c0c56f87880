// single-profile-handler (GIE): runs the one profile once; its result is
// the answer (the picker's first target primary, the rest fallbacks).
#pragma once

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

class SingleProfileHandler final : public Plugin, public ProfileHandler {
 public:
  static constexpr std::string_view kType = "single-profile-handler";
  std::string_view type() const override { return kType; }
  void pick(CycleState& cycle, const Request& request, std::span<const Profile> profiles,
            std::span<const ProfileResult> results, std::vector<const Profile*>& next) override;
  SchedulingResult process_results(CycleState& cycle, const Request& request,
                                   std::span<const ProfileResult> results) override;
  // The answer of the one profile that ran: its targets, its first the
  // one serving (also data-parallel-profile-handler's, before its port).
  static SchedulingResult one_result(std::span<const ProfileResult> results);
};

}  // namespace sluice::scheduling
