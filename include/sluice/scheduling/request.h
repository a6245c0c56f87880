// What the scheduler knows of one request. Built on the I/O thread before
// admission (parsing, token estimate, prefix hashing are done there), then
// read-only: the dispatcher only reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::scheduling {

struct Request {
  std::string request_id;
  std::string model;               // the body's "model" (a base model or a LoRA adapter)
  std::string session_token;       // x-session-token, for session affinity
  std::uint64_t input_tokens = 0;  // estimate
  // approx-prefix-cache-producer: the chained hashes of the prompt's full
  // blocks, first block first, at most maxPrefixBlocksToMatch of them.
  std::vector<std::uint64_t> prefix_hashes;
  // Prompt length in blocks (full ones), even beyond the hashed ones.
  std::uint64_t prompt_blocks = 0;
  std::uint32_t block_size_tokens = 16;
};

}  // namespace sluice::scheduling
