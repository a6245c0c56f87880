// A config file as sluice reads it at startup and on reload: the loader,
// then what resolves the plugins' parameters (the scheduler's factories and
// the flow-control policies). ConfigError is the documented outcome of a
// bad file (config/config.h); any other exception, a crash or a sanitizer
// report is a finding. Nothing here touches the network or the disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "finding.h"
#include "flowcontrol/from_config.h"
#include "scheduling/from_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = sluice::config::load_config_string(text, "<fuzz>");
    (void)sluice::scheduling::build_scheduler(config);
    (void)sluice::flowcontrol::controller_config(config);
  } catch (const sluice::config::ConfigError&) {
    // A rejected config: expected.
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("config loading", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("config loading");
  }
  return 0;
}
