#include "extensions/builtin_dp.h"

#include <cstdint>
#include <string>

#include "scheduling/plugins/data_parallel_profile_handler.h"

namespace sluice {

namespace {

using scheduling::DataParallelProfileHandler;

// data-parallel-profile-handler: primaryPort, an integer in 1..65535
// (default 8000), or 0 as llm-d accepts it — in sluice each rank's own
// port (docs/configuration.md).
std::unique_ptr<Plugin> make_data_parallel_profile_handler(PluginParams& p, PluginContext&) {
  const auto port = p.integer("primaryPort", INT64_MIN, INT64_MAX)
                        .value_or(DataParallelProfileHandler::kDefaultPrimaryPort);
  if (port < 0 || port > 65535)
    p.fail("primaryPort",
           "must be between 1 and 65535 (or 0: each rank's own port), got " + std::to_string(port));
  p.finish();
  return std::make_unique<DataParallelProfileHandler>(static_cast<std::uint16_t>(port));
}

}  // namespace

void add_dp_plugins(ExtensionRegistry& r) {
  r.add<Plugin>(ExtensionKind::kProfileHandler, std::string(DataParallelProfileHandler::kType),
                make_data_parallel_profile_handler);
}

}  // namespace sluice
