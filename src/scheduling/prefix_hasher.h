// Prefix hashing for approximate prefix-cache affinity, run on the I/O
// thread before admission (it needs no shared state): the prompt is cut
// into blocks of blockSizeTokens x 4 characters and each full block's hash
// is chained to the previous one, the chain seeded with the model name, so
// a block hash identifies the whole prefix up to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scheduling/scheduler.h"
#include "sluice/scheduling/request.h"

namespace sluice::scheduling {

// Fills request.prefix_hashes (at most prep.max_prefix_blocks), prompt_blocks
// and block_size_tokens. `prompt` may be cut after the hashed blocks;
// `prompt_chars` is then the whole prompt's length (for prompt_blocks).
void compute_prefix_hashes(std::string_view prompt, std::string_view model,
                           const RequestPreparation& prep, Request& request,
                           std::size_t prompt_chars = SIZE_MAX);

// How much prompt text the hashing reads at most.
inline std::size_t prefix_text_limit(const RequestPreparation& prep) {
  return std::size_t{prep.max_prefix_blocks} * prep.block_size_tokens * prep.chars_per_token;
}

}  // namespace sluice::scheduling
