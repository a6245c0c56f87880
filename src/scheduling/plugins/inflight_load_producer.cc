#include "scheduling/plugins/inflight_load_producer.h"

#include <algorithm>
#include <cmath>

namespace sluice::scheduling {

InFlightLoadProducer::InFlightLoadProducer(InFlightLoadParams p, ApproxPrefixCacheProducer* prefix)
    : params_(p), prefix_(prefix) {
  if (prefix_) prefix_->keep_match_for_lifecycle();
}

std::uint64_t InFlightLoadProducer::request_tokens(const Request& request, std::uint64_t matched,
                                                   std::uint64_t total) const {
  const std::uint64_t input = request.input_tokens;
  std::uint64_t tokens = input;
  if (prefix_) {
    // llm-d's uncachedInputTokens: the hashed part not matched, plus the
    // prompt past the hashed part.
    const std::uint64_t bs = request.block_size_tokens;
    const std::uint64_t indexed = total * bs;
    const std::uint64_t cached = std::min(matched, total) * bs;
    tokens = (indexed - cached) + (input > indexed ? input - indexed : 0);
  }
  if (params_.add_estimated_output_tokens && input > 0) {
    auto out =
        static_cast<std::uint64_t>(std::llround(static_cast<double>(input) * params_.output_ratio));
    if (params_.max_estimated_output_tokens)
      out = std::min(out, *params_.max_estimated_output_tokens);
    tokens += out;
  }
  return tokens;
}

void InFlightLoadProducer::cover(std::uint32_t slot) {
  if (slot < tokens_.size()) return;
  tokens_.resize(slot + 1, 0);
  requests_.resize(slot + 1, 0);
  held_.resize(slot + 1, 0.0);
  cached_.resize(slot + 1, 0.0);
}

InFlightLoadProducer::LoadView InFlightLoadProducer::begin_load(CycleState& cycle,
                                                                const Request& request) {
  const PrefixMatch* m = prefix_ ? &prefix_->match(cycle, request) : nullptr;
  const std::uint64_t total = m ? m->total_blocks : 0;
  if (m) {
    // What an endpoint holding `blocks` saves over one holding none:
    // request_tokens(0) - request_tokens(blocks) = min(blocks, total) x block size.
    const double bs = static_cast<double>(request.block_size_tokens);
    for (const auto& [slot, blocks] : m->matched) {
      cover(slot);
      cached_[slot] = static_cast<double>(std::min<std::uint64_t>(blocks, total)) * bs;
    }
    loading_ = m;
  }
  // Most endpoints hold none of the prompt: what it adds there is computed
  // once, not once per endpoint.
  return LoadView{held_.data(), cached_.data(), held_.size(),
                  static_cast<double>(request_tokens(request, 0, total))};
}

void InFlightLoadProducer::end_load() {
  if (!loading_) return;
  for (const auto& [slot, blocks] : loading_->matched) cached_[slot] = 0.0;
  loading_ = nullptr;
}

void InFlightLoadProducer::pre_request(CycleState& cycle, const Request& request,
                                       SchedulingResult& result) {
  const PrefixMatch* m = prefix_ ? &prefix_->match(cycle, request) : nullptr;
  Charges& c = cycle.put(charges_key_);
  for (const Endpoint* e : result.serving) {
    if (c.n == c.of.size()) break;
    const std::uint64_t t =
        request_tokens(request, m ? m->blocks_on(e->index) : 0, m ? m->total_blocks : 0);
    cover(e->index);
    tokens_[e->index] += t;
    held_[e->index] = static_cast<double>(tokens_[e->index]);
    requests_[e->index] += 1;
    c.of[c.n++] = Charge{e->index, t, true};
  }
}

void InFlightLoadProducer::release(Charge& c, bool tokens, bool request) {
  if (c.slot >= tokens_.size()) return;
  if (tokens) {
    tokens_[c.slot] -= std::min(tokens_[c.slot], c.tokens);
    held_[c.slot] = static_cast<double>(tokens_[c.slot]);
    c.tokens = 0;
  }
  if (request && c.request) {
    requests_[c.slot] -= std::min<std::uint64_t>(requests_[c.slot], 1);
    c.request = false;
  }
}

void InFlightLoadProducer::response_started(CycleState& cycle, const Request&) {
  if (!params_.release_at_first_chunk) return;
  Charges* c = cycle.get(charges_key_);
  if (!c) return;
  // Prefill is done: the prefill endpoints' part ends; the destination's
  // prompt tokens too unless they carry an output estimate (llm-d).
  for (std::uint32_t i = 1; i < c->n; ++i) release(c->of[i], true, true);
  if (c->n > 0 && !params_.add_estimated_output_tokens) release(c->of[0], true, false);
}

void InFlightLoadProducer::response_complete(CycleState& cycle, const Request&, std::uint32_t,
                                             std::uint64_t) {
  Charges* c = cycle.get(charges_key_);
  if (!c) return;
  for (std::uint32_t i = 0; i < c->n; ++i) release(c->of[i], true, true);
  c->n = 0;  // released once
}

}  // namespace sluice::scheduling
