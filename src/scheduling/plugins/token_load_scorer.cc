#include "scheduling/plugins/token_load_scorer.h"

#include <algorithm>

namespace sluice::scheduling {

void TokenLoadScorer::score_columns(CycleState& cycle, const Request& request,
                                    std::span<const Endpoint* const>,
                                    const CandidateColumns& columns, std::span<double> scores) {
  // One pass: the load read through the producer's view and scored at
  // once. Locals, not members: through `this` the compiler reloads them
  // after every store into `scores`.
  const InFlightLoadProducer::LoadView v = producer_->begin_load(cycle, request);
  const double t = threshold_;
  const double inv = 1.0 / t;
  const std::uint32_t* slot = columns.slot.data();
  double* out = scores.data();
  const std::size_t n = columns.size();
  // A load is never negative, so min(load, T) / T is 0 for an idle
  // endpoint and it scores 1, as llm-d's load <= 0 case.
  for (std::size_t i = 0; i < n; ++i) out[i] = 1.0 - std::min(v.at(slot[i]), t) * inv;
  producer_->end_load();
}

}  // namespace sluice::scheduling
