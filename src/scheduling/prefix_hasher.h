// Prefix hashing for approximate prefix-cache affinity, run on the I/O
// thread before admission (it needs no shared state): the prompt is cut
// into blocks of blockSizeTokens x 4 characters and each full block's hash
// is chained to the previous one, the chain seeded with the model name, so
// a block hash identifies the whole prefix up to it.
#pragma once

#include <string_view>

#include "scheduling/scheduler.h"
#include "sluice/scheduling/request.h"

namespace sluice::scheduling {

// Fills request.prefix_hashes (at most prep.max_prefix_blocks), prompt_blocks
// and block_size_tokens.
void compute_prefix_hashes(std::string_view prompt, std::string_view model, const RequestPreparation& prep,
                           Request& request);

}  // namespace sluice::scheduling
