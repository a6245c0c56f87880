#include "scheduling/plugins/single_profile_handler.h"

namespace sluice::scheduling {

void SingleProfileHandler::pick(CycleState&, const Request&, std::span<const Profile> profiles,
                                std::span<const ProfileResult> results,
                                std::vector<const Profile*>& next) {
  if (results.empty() && !profiles.empty()) next.push_back(&profiles.front());
}

SchedulingResult SingleProfileHandler::process_results(CycleState&, const Request&,
                                                       std::span<const ProfileResult> results) {
  return one_result(results);
}

SchedulingResult SingleProfileHandler::one_result(std::span<const ProfileResult> results) {
  SchedulingResult r;
  if (results.empty()) {
    r.error = "no profile ran";
    return r;
  }
  const ProfileResult& p = results.front();
  r.primary_profile = p.profile->name;
  if (!p.ok) {
    r.error = p.error;
    return r;
  }
  r.ok = true;
  r.targets = p.targets;
  r.serving.push_back(p.targets.front());
  return r;
}

}  // namespace sluice::scheduling
