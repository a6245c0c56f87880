#include "tools/mock/mock_engine.h"

#include <xxhash.h>

#include <algorithm>
#include <array>

namespace sluice::mock {
namespace {

constexpr std::array<std::string_view, 16> kWords = {
    " the",  " model", " token", " of",   " a",       " fair", " queue", " and",
    " flow", " to",    " serve", " each", " request", " in",   " time",  " well"};

}  // namespace

MockEngine::MockEngine(EngineOptions options) : options_(options) {}

std::shared_ptr<Sequence> MockEngine::make_sequence(std::string_view model,
                                                    std::string_view prompt_text,
                                                    std::uint32_t prompt_tokens,
                                                    std::uint32_t max_tokens) {
  auto seq = std::make_shared<Sequence>();
  seq->id = next_id_++;
  seq->prompt_tokens = prompt_tokens;
  seq->max_tokens = max_tokens;
  // Prefix blocks: 16 tokens of 4 characters, each hash chained to the
  // previous one and seeded with the model name, as prefix caches do.
  std::uint64_t h = XXH3_64bits(model.data(), model.size());
  constexpr std::size_t kBlockChars = kBlockTokens * kCharsPerToken;
  for (std::size_t off = 0; off + kBlockChars <= prompt_text.size(); off += kBlockChars) {
    h = XXH3_64bits_withSeed(prompt_text.data() + off, kBlockChars, h);
    seq->block_hashes.push_back(h);
  }
  std::uint64_t content =
      XXH3_64bits_withSeed(prompt_text.data(), prompt_text.size(), options_.seed);
  seq->rng.seed(content ^ (static_cast<std::uint64_t>(max_tokens) << 32));
  return seq;
}

void MockEngine::submit(std::shared_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

std::uint32_t MockEngine::lookup_prefix(const Sequence& seq) const {
  if (!options_.prefix_cache) return 0;
  std::uint32_t blocks = 0;
  for (auto h : seq.block_hashes) {
    if (!lru_index_.count(h)) break;
    ++blocks;
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(
      seq.prompt_tokens, static_cast<std::uint64_t>(blocks) * kBlockTokens));
}

void MockEngine::insert_prefix(const Sequence& seq) {
  if (!options_.prefix_cache) return;
  const std::size_t capacity = std::max<std::uint64_t>(1, kv_capacity_blocks());
  for (auto h : seq.block_hashes) {
    auto it = lru_index_.find(h);
    if (it != lru_index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    lru_.push_front(h);
    lru_index_[h] = lru_.begin();
    if (lru_.size() > capacity) {
      lru_index_.erase(lru_.back());
      lru_.pop_back();
    }
  }
}

std::uint64_t MockEngine::kv_used_tokens() const {
  std::uint64_t used = 0;
  for (const auto& s : running_) used += s->prompt_tokens + s->generated;
  return used;
}

std::deque<std::shared_ptr<Sequence>>::iterator MockEngine::next_waiting() {
  if (!options_.priority_scheduling) return waiting_.begin();
  return std::min_element(waiting_.begin(), waiting_.end(), [](const auto& a, const auto& b) {
    return a->priority != b->priority ? a->priority < b->priority : a->id < b->id;
  });
}

std::size_t MockEngine::preempt_for_kv() {
  std::size_t preempted = 0;
  // Each running sequence takes one more token's KV this step.
  while (running_.size() > 1 && kv_used_tokens() + running_.size() > options_.kv_capacity_tokens) {
    auto victim = running_.end() - 1;  // fcfs: the last scheduled
    if (options_.priority_scheduling)
      victim = std::max_element(running_.begin(), running_.end(), [](const auto& a, const auto& b) {
        return a->priority != b->priority ? a->priority < b->priority : a->id < b->id;
      });
    auto seq = std::move(*victim);
    running_.erase(victim);
    seq->running = false;
    seq->preemptions += 1;
    seq->cached_tokens = 0;  // its KV is gone: recomputed when it runs again
    waiting_.push_front(std::move(seq));
    ++preempted;
    ++preemptions_;
  }
  return preempted;
}

std::optional<std::chrono::microseconds> MockEngine::begin_step() {
  std::erase_if(running_, [](const auto& s) { return s->cancelled; });
  std::erase_if(waiting_, [](const auto& s) { return s->cancelled; });
  double prefill_us = 0;
  // As vLLM: no new admission in a step that had to preempt.
  const bool preempted = preempt_for_kv() > 0;
  std::uint64_t used = kv_used_tokens();
  while (!preempted && !waiting_.empty() && running_.size() < options_.max_running) {
    auto it = next_waiting();
    auto& next = *it;
    // A prompt that does not fit next to the running batch waits; one that
    // could never fit still runs alone rather than wait forever.
    if (!running_.empty() &&
        used + next->prompt_tokens + next->generated > options_.kv_capacity_tokens)
      break;
    next->cached_tokens = lookup_prefix(*next);
    prefix_hit_tokens_ += next->cached_tokens;
    insert_prefix(*next);
    // A preempted sequence recomputes its prompt and what it generated.
    prefill_us += (next->prompt_tokens + next->generated - next->cached_tokens) *
                  options_.prefill_us_per_token;
    used += next->prompt_tokens + next->generated;
    next->running = true;
    running_.push_back(std::move(next));
    waiting_.erase(it);
  }
  if (running_.empty()) return std::nullopt;
  double us = options_.decode_ms_per_token * 1000.0 + prefill_us;
  return std::chrono::microseconds(static_cast<std::int64_t>(us + 0.5));
}

void MockEngine::end_step() {
  // Callbacks may cancel or submit sequences; iterate over a stable copy.
  auto batch = running_;
  for (auto& s : batch) {
    if (s->cancelled) continue;
    if (s->max_tokens == 0) {
      s->running = false;
      if (s->on_token) s->on_token(*s, {}, true);
      continue;
    }
    s->generated += 1;
    std::string_view word = kWords[s->rng() % kWords.size()];
    bool last = s->generated >= s->max_tokens;
    if (last) s->running = false;
    if (s->on_token) s->on_token(*s, word, last);
  }
  std::erase_if(running_, [](const auto& s) { return s->cancelled || !s->running; });
}

std::size_t MockEngine::waiting() const {
  return static_cast<std::size_t>(
      std::count_if(waiting_.begin(), waiting_.end(), [](const auto& s) { return !s->cancelled; }));
}

std::size_t MockEngine::running() const {
  return static_cast<std::size_t>(
      std::count_if(running_.begin(), running_.end(), [](const auto& s) { return !s->cancelled; }));
}

double MockEngine::kv_usage() const {
  if (options_.kv_capacity_tokens == 0) return 0;
  return std::min(1.0, static_cast<double>(kv_used_tokens()) / options_.kv_capacity_tokens);
}

}  // namespace sluice::mock
