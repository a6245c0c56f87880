// The flow controller under random streams of operations, against the
// model in test/support/flow_control_ops.h (every request answered once,
// never another's answer, the queued count exact, nothing left at the end).
// The same driver is the fuzz target fuzz_flow_control; this runs a fixed
// set of streams in `make test`.
#include "../../support/flow_control_ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace sluice::testing {
namespace {

TEST(FlowControlOps, RandomStreamsGiveEveryRequestOneAnswer) {
  std::mt19937 rng(20261127);
  std::vector<std::uint8_t> bytes;
  OpsCoverage coverage;
  for (int stream = 0; stream < 400; ++stream) {
    bytes.resize(200 + rng() % 6000);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const std::string violation = run_flow_control_ops(bytes.data(), bytes.size(), &coverage);
    ASSERT_EQ(violation, "") << "stream " << stream;
  }
  // The streams reach every answer the controller gives on its own (the
  // scheduler's rejection and the catch-alls need a scheduler or a fault).
  for (QueueOutcome o : {QueueOutcome::kDispatched, QueueOutcome::kRejectedCapacity,
                         QueueOutcome::kRejectedNoEndpoints, QueueOutcome::kEvictedTTL,
                         QueueOutcome::kEvictedContextCancelled, QueueOutcome::kEvictedDisplaced,
                         QueueOutcome::kEvictedPreempted})
    EXPECT_GT(coverage.outcomes[static_cast<std::size_t>(o)], 10u) << dropped_reason(o);
}

}  // namespace
}  // namespace sluice::testing
