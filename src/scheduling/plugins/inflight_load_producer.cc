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

void InFlightLoadProducer::fill_by_slot(const PrefixMatch& m) {
  for (const auto& [slot, blocks] : m.matched) {
    if (slot >= by_slot_.size()) by_slot_.resize(slot + 1, 0);
    by_slot_[slot] = blocks;
  }
}

void InFlightLoadProducer::clear_by_slot(const PrefixMatch& m) {
  for (const auto& [slot, blocks] : m.matched) by_slot_[slot] = 0;
}

void InFlightLoadProducer::token_load(CycleState& cycle, const Request& request,
                                      std::span<const std::uint32_t> slots, std::span<double> out) {
  const PrefixMatch* m = prefix_ ? &prefix_->match(cycle, request) : nullptr;
  const std::uint64_t total = m ? m->total_blocks : 0;
  if (m) fill_by_slot(*m);
  // Most endpoints hold none of the prompt: what it adds there is computed
  // once, not once per endpoint.
  const std::uint64_t cold = request_tokens(request, 0, total);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::uint32_t slot = slots[i];
    const std::uint64_t matched = m && slot < by_slot_.size() ? by_slot_[slot] : 0;
    const std::uint64_t adds = matched ? request_tokens(request, matched, total) : cold;
    out[i] = static_cast<double>(tokens_in_flight(slot) + adds);
  }
  if (m) clear_by_slot(*m);
}

void InFlightLoadProducer::pre_request(CycleState& cycle, const Request& request,
                                       SchedulingResult& result) {
  const PrefixMatch* m = prefix_ ? &prefix_->match(cycle, request) : nullptr;
  Charges& c = cycle.put(charges_key_);
  for (const Endpoint* e : result.serving) {
    if (c.n == c.of.size()) break;
    const std::uint64_t t =
        request_tokens(request, m ? m->blocks_on(e->index) : 0, m ? m->total_blocks : 0);
    if (e->index >= tokens_.size()) {
      tokens_.resize(e->index + 1, 0);
      requests_.resize(e->index + 1, 0);
    }
    tokens_[e->index] += t;
    requests_[e->index] += 1;
    c.of[c.n++] = Charge{e->index, t, true};
  }
}

void InFlightLoadProducer::release(Charge& c, bool tokens, bool request) {
  if (c.slot >= tokens_.size()) return;
  if (tokens) {
    tokens_[c.slot] -= std::min(tokens_[c.slot], c.tokens);
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
