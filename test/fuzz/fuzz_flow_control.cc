// The flow controller's state machine under a stream of operations chosen by
// the input (configuration, enqueues from a few tenants and bands with their
// own TTLs, dispatches, completions, output tokens, cancels, time passing,
// the pool emptying and filling, reloads), checked after every operation
// against a model: every request gets one answer while queued, never
// another request's, the queued count is exact, and a final drain leaves
// nothing unanswered. See test/support/flow_control_ops.h. Requests are the
// tenants' input: an order of operations that loses or double-answers one
// is a finding, as is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "../support/flow_control_ops.h"
#include "finding.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string violation;
  try {
    violation = sluice::testing::run_flow_control_ops(data, size);
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("the flow controller", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("the flow controller");
  }
  if (!violation.empty()) {
    std::fprintf(stderr, "FINDING: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
