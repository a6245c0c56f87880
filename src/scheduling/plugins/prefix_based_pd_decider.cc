#include "scheduling/plugins/prefix_based_pd_decider.h"

namespace sluice::scheduling {

bool PrefixBasedPdDecider::disaggregate(CycleState& cycle, const Request& request,
                                        const Endpoint& decode) {
  if (non_cached_tokens_ == 0) return false;
  const std::uint64_t input = request.input_tokens;
  if (input < non_cached_tokens_) return false;
  std::uint64_t cached_blocks = 0;
  if (producer_) {
    PrefixMatch* m = cycle.get(producer_->match_key());
    if (!m) {  // the decode profile had no prefix scorer: look it up here
      m = &cycle.put(producer_->match_key());
      producer_->index().match(request.prefix_hashes, *m);
    }
    cached_blocks = m->blocks_on(decode.index);
  }
  const std::uint64_t cached = cached_blocks * request.block_size_tokens;
  return input > cached && input - cached >= non_cached_tokens_;
}

}  // namespace sluice::scheduling
