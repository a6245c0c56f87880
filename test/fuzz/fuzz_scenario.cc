// A sluice-load scenario file. ScenarioError is the documented outcome of a
// bad file (tools/load/scenario.h); anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "finding.h"
#include "tools/load/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)sluice::load::parse_scenario(text, "<fuzz>");
  } catch (const sluice::load::ScenarioError&) {
    // A rejected scenario: expected.
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("parse_scenario", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("parse_scenario");
  }
  return 0;
}
