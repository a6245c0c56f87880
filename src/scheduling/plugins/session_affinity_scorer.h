// session-affinity-scorer (llm-d): keeps a session on the endpoint that
// served it before. The response carries `x-session-token` (base64 of the
// serving endpoint's address); a request that sends it back scores that
// endpoint 1 and every other 0. No token, or one naming no candidate: all 0.
#pragma once

#include <string>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

inline constexpr std::string_view kSessionTokenHeader = "x-session-token";

std::string base64_encode(std::string_view in);
// Empty on malformed input.
std::string base64_decode(std::string_view in);

class SessionAffinityScorer final : public Plugin, public Scorer, public RequestLifecycle {
 public:
  static constexpr std::string_view kType = "session-affinity-scorer";
  std::string_view type() const override { return kType; }
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) override;
  void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) override;
};

}  // namespace sluice::scheduling
