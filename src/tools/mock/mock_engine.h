// The model-server simulator's engine: continuous batching with a bounded
// running batch, prefill cost per uncached input token, decode cost per output
// token per step, a KV cache measured in tokens and an optional prefix cache.
//
// Pure logic, no clock and no I/O: the shell asks begin_step() how long the
// next step takes, waits that long, then calls end_step(), which emits one
// token to every running sequence. Unit tests drive it directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::mock {

struct EngineOptions {
  std::size_t max_running = 8;
  double prefill_us_per_token = 100.0;  // 0.1 ms per input token
  double decode_ms_per_token = 20.0;    // one decode step
  std::uint64_t kv_capacity_tokens = 65536;
  bool prefix_cache = true;
  std::uint64_t seed = 1;
  // vLLM's --scheduling-policy: fcfs, or priority (the waiting queue by
  // (priority, arrival), lower first; under KV pressure the running
  // sequence with the largest (priority, arrival) is preempted).
  bool priority_scheduling = false;
};

constexpr std::size_t kBlockTokens = 16;
constexpr std::size_t kCharsPerToken = 4;

struct Sequence {
  std::uint64_t id = 0;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;  // prompt tokens found in the prefix cache
  std::uint32_t max_tokens = 16;
  std::uint32_t generated = 0;
  std::vector<std::uint64_t> block_hashes;  // chained hashes of full prompt blocks
  std::mt19937_64 rng;
  bool cancelled = false;
  bool running = false;
  std::int64_t priority = 0;  // vLLM's: lower is served first
  std::uint32_t preemptions = 0;
  // Called on end_step for each token; `last` is set on the final one. With
  // max_tokens 0 it is called once with an empty token and last = true.
  std::function<void(Sequence&, std::string_view token, bool last)> on_token;
};

class MockEngine {
 public:
  explicit MockEngine(EngineOptions options);

  // Makes a sequence for a prompt. Tokens are estimated as in sluice
  // (4 characters per token); the token stream is a deterministic function
  // of the seed and the prompt.
  std::shared_ptr<Sequence> make_sequence(std::string_view model, std::string_view prompt_text,
                                          std::uint32_t prompt_tokens, std::uint32_t max_tokens);
  void submit(std::shared_ptr<Sequence> seq);
  // Marks a sequence as gone (client disconnected); it leaves at the next step.
  void cancel(Sequence& seq) { seq.cancelled = true; }

  // Admits waiting sequences and returns the duration of the next step, or
  // nullopt when there is nothing to do.
  std::optional<std::chrono::microseconds> begin_step();
  // Emits one token to each running sequence and retires finished ones.
  void end_step();

  std::size_t waiting() const;
  std::size_t running() const;
  double kv_usage() const;  // 0..1
  std::uint64_t prefix_hits_tokens() const { return prefix_hit_tokens_; }
  std::uint64_t preemptions() const { return preemptions_; }
  std::uint64_t kv_capacity_blocks() const { return options_.kv_capacity_tokens / kBlockTokens; }
  const EngineOptions& options() const { return options_; }

 private:
  std::uint32_t lookup_prefix(const Sequence& seq) const;
  void insert_prefix(const Sequence& seq);
  std::uint64_t kv_used_tokens() const;
  // The waiting sequence to admit next: the front (fcfs) or the smallest
  // (priority, arrival).
  std::deque<std::shared_ptr<Sequence>>::iterator next_waiting();
  // Frees the KV of running sequences until this step's tokens fit
  // (vLLM's preemption); returns how many were preempted.
  std::size_t preempt_for_kv();

  EngineOptions options_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::vector<std::shared_ptr<Sequence>> running_;
  std::uint64_t next_id_ = 1;
  std::uint64_t prefix_hit_tokens_ = 0;
  std::uint64_t preemptions_ = 0;
  // LRU of prompt block hashes (most recent at the front).
  std::list<std::uint64_t> lru_;
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> lru_index_;
};

}  // namespace sluice::mock
