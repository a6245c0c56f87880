#include "scheduling/plugins/data_parallel_profile_handler.h"

#include <charconv>

#include "scheduling/plugins/single_profile_handler.h"

namespace sluice::scheduling {

void DataParallelProfileHandler::pick(CycleState&, const Request&,
                                      std::span<const Profile> profiles,
                                      std::span<const ProfileResult> results,
                                      std::vector<const Profile*>& next) {
  // llm-d runs nothing when the profile count is not one; sluice refuses
  // such a config at load, so this is the one profile's single run.
  if (results.empty() && profiles.size() == 1) next.push_back(&profiles.front());
}

SchedulingResult DataParallelProfileHandler::process_results(
    CycleState&, const Request&, std::span<const ProfileResult> results) {
  // The one profile's answer (sluice refuses a second profile at load);
  // the ranks stay the targets (and their fallbacks): only the port the
  // connection goes to changes, and the header names the rank.
  SchedulingResult r = SingleProfileHandler::one_result(results);
  if (!r.ok) return r;
  r.upstream_port = primary_port_;
  r.rank_header = kDataParallelHeader;
  return r;
}

void DataParallelProfileHandler::append_rank_address(std::string& out, std::string_view host,
                                                     std::uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  if (v6) out += '[';
  out += host;
  if (v6) out += ']';
  out += ':';
  char buf[8];
  auto end = std::to_chars(buf, buf + sizeof buf, port).ptr;
  out.append(buf, static_cast<std::size_t>(end - buf));
}

}  // namespace sluice::scheduling
