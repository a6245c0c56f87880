// data-parallel-profile-handler (llm-d, deprecated there in favour of
// single-profile-handler with Istio >= 1.28.1, still in its wide-ep guide):
// each data-parallel rank of an engine is an endpoint (host:rank port), but
// only the engine's front-end on the host's primaryPort takes requests. The
// one scheduling profile picks a rank; the request is sent to that rank's
// host on primaryPort with `x-data-parallel-host-port: <rank host:port>`,
// and the front-end hands it to the rank.
//
// The rank stays the target: sluice accounts the request (in flight, load,
// flow-control credit, per-endpoint metrics, prefix state) to it; only the
// connection goes elsewhere (SchedulingResult::upstream_port), and the
// proxy writes the header for the endpoint it actually sends to.
//
// Parameters: primaryPort (default 8000, 1..65535; 0 keeps each rank's own
// port — llm-d sends to port "0" then).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

inline constexpr std::string_view kDataParallelHeader = "x-data-parallel-host-port";

class DataParallelProfileHandler final : public Plugin, public ProfileHandler {
 public:
  static constexpr std::string_view kType = "data-parallel-profile-handler";
  static constexpr std::uint16_t kDefaultPrimaryPort = 8000;

  explicit DataParallelProfileHandler(std::uint16_t primary_port) : primary_port_(primary_port) {}
  std::string_view type() const override { return kType; }
  std::uint16_t primary_port() const { return primary_port_; }

  // The one profile, once (a config with more is refused at load).
  void pick(CycleState& cycle, const Request& request, std::span<const Profile> profiles,
            std::span<const ProfileResult> results, std::vector<const Profile*>& next) override;
  SchedulingResult process_results(CycleState& cycle, const Request& request,
                                   std::span<const ProfileResult> results) override;

  // Appends "host:port" as Go's net.JoinHostPort writes it: a host with a
  // colon (IPv6) in brackets. The header's value; no allocation beyond
  // `out`'s growth.
  static void append_rank_address(std::string& out, std::string_view host, std::uint16_t port);

 private:
  std::uint16_t primary_port_;
};

}  // namespace sluice::scheduling
