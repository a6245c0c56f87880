#include "scheduling/prefix_hasher.h"

#include <xxhash.h>

#include <algorithm>

namespace sluice::scheduling {

void compute_prefix_hashes(std::string_view prompt, std::string_view model,
                           const RequestPreparation& prep, Request& request,
                           std::size_t prompt_chars) {
  const std::size_t block_chars =
      std::max<std::size_t>(1, std::size_t{prep.block_size_tokens} * prep.chars_per_token);
  request.block_size_tokens = prep.block_size_tokens;
  request.prompt_blocks =
      std::max(prompt.size(), prompt_chars == SIZE_MAX ? 0 : prompt_chars) / block_chars;
  const std::size_t n = std::min<std::size_t>(request.prompt_blocks, prep.max_prefix_blocks);
  request.prefix_hashes.resize(n);
  XXH64_hash_t h = XXH3_64bits(model.data(), model.size());
  for (std::size_t i = 0; i < n; ++i) {
    h = XXH3_64bits_withSeed(prompt.data() + i * block_chars, block_chars, h);
    request.prefix_hashes[i] = h;
  }
}

}  // namespace sluice::scheduling
