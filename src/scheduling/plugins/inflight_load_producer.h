// inflight-load-producer (llm-d): the load each endpoint carries in tokens
// — the prompt tokens of the requests in flight on it that it had not
// cached when they were sent (plus, with addEstimatedOutputTokens, an
// estimate of their output) — and what one more request would add there.
// token-load-scorer and prefix-cache-affinity-filter read it; the scorers
// that count requests read sluice's own Endpoint::in_flight, and the
// producer's own request count (llm-d's) feeds llm_d_epp_inflight_requests.
//
// llm-d: pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload.
// A request's tokens on an endpoint are its input tokens the endpoint has
// not cached: (hashed blocks - matched blocks) x block size, plus the
// prompt beyond the hashed blocks; without a prefix producer, all of its
// input tokens. Charged at dispatch, with one request, on every endpoint
// that serves it (decode and, in P/D, prefill). Released as llm-d's
// producer does (its ResponseBody):
//   - at the response's first body bytes (StartOfStream: prefill is done),
//     the prefill endpoint's tokens and request; without
//     addEstimatedOutputTokens also the decode endpoint's tokens (its
//     request stays counted);
//   - when the response ends (any way), whatever is left.
// releasePromptTokensAt: completion (sluice's option) keeps everything
// until the end: the prompt's KV cache stays on the decode endpoint until
// then, so its token load reads as memory held rather than prefill queued.
//
// One writer: the dispatcher thread (pre_request at dispatch,
// response_started and response_complete later, the scorers in the cycle).
// The counters are vectors by endpoint slot: bounded by the pool.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "scheduling/plugins/approx_prefix_cache_producer.h"

namespace sluice::scheduling {

struct InFlightLoadParams {
  bool add_estimated_output_tokens = false;                  // addEstimatedOutputTokens
  double output_ratio = 1.5;                                 // outputRatio: output ~ input x ratio
  std::optional<std::uint64_t> max_estimated_output_tokens;  // maxEstimatedOutputTokens
  bool release_at_first_chunk = true;  // releasePromptTokensAt: firstChunk (llm-d) | completion
};

class InFlightLoadProducer final : public Plugin, public RequestLifecycle {
 public:
  static constexpr std::string_view kType = "inflight-load-producer";
  // `prefix` may be null: every input token then counts as uncached.
  InFlightLoadProducer(InFlightLoadParams p, ApproxPrefixCacheProducer* prefix);
  std::string_view type() const override { return kType; }

  // Tokens in flight on endpoint `slot` (0 for a slot never charged).
  std::uint64_t tokens_in_flight(std::uint32_t slot) const {
    return slot < tokens_.size() ? tokens_[slot] : 0;
  }
  // Requests in flight on endpoint `slot` as llm-d's producer counts them
  // (a prefill endpoint's leaves at the first response bytes).
  std::uint64_t requests_in_flight(std::uint32_t slot) const {
    return slot < requests_.size() ? requests_[slot] : 0;
  }
  // tokens_in_flight by slot, as doubles (slots past its end hold none).
  std::span<const double> held() const { return held_; }
  // Slots ever charged (at most the pool's size).
  std::size_t slots() const { return tokens_.size(); }
  // What `request` adds on an endpoint holding `matched` of its `total`
  // hashed blocks: its uncached input tokens (+ estimated output).
  std::uint64_t request_tokens(const Request& request, std::uint64_t matched,
                               std::uint64_t total) const;
  // What `request` adds on each endpoint plus its tokens in flight
  // (llm-d's InFlightLoad.Tokens + UncachedRequestTokens), as a view for a
  // caller that folds the load into its own pass (token-load-scorer).
  // Between begin_load and end_load (same cycle, nothing else of this
  // producer's in between), the load on slot s is
  // (s < n ? held[s] - cached[s] : 0) + cold — what the request adds on
  // an endpoint holding none of it, less what that endpoint holds of it,
  // plus its tokens in flight. Exact: every term is an integer below 2^53.
  struct LoadView {
    const double* held = nullptr;    // tokens in flight, by slot
    const double* cached = nullptr;  // the request's cached input tokens, by slot
    std::size_t n = 0;
    double cold = 0;
    double at(std::uint32_t s) const { return (s < n ? held[s] - cached[s] : 0.0) + cold; }
  };
  LoadView begin_load(CycleState& cycle, const Request& request);
  void end_load();
  ApproxPrefixCacheProducer* prefix() const { return prefix_; }

  void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) override;
  void response_started(CycleState& cycle, const Request& request) override;
  bool wants_response_started() const override { return params_.release_at_first_chunk; }
  void response_complete(CycleState& cycle, const Request& request, std::uint32_t endpoint_index,
                         std::uint64_t output_tokens) override;

 private:
  // One per serving endpoint, in SchedulingResult::serving's order: the
  // first is the request's destination (decode), the others prefill.
  struct Charge {
    std::uint32_t slot = 0;
    std::uint64_t tokens = 0;  // still held
    bool request = false;      // still held
  };
  struct Charges {
    std::array<Charge, 4> of{};
    std::uint32_t n = 0;
  };
  void release(Charge& c, bool tokens, bool request);
  // tokens_ grown to cover `slot`, with its mirrors.
  void cover(std::uint32_t slot);

  InFlightLoadParams params_;
  ApproxPrefixCacheProducer* prefix_;
  std::vector<std::uint64_t> tokens_;    // by endpoint slot
  std::vector<std::uint64_t> requests_;  // by endpoint slot
  // tokens_ as doubles, and the request's cached input tokens by slot
  // (scratch between begin_load and end_load, zero otherwise): the
  // scorers' pass reads them without converting or branching per slot.
  // Always the size of tokens_.
  std::vector<double> held_;
  std::vector<double> cached_;
  const PrefixMatch* loading_ = nullptr;  // the match begin_load spread into cached_
  CycleKey<Charges> charges_key_;
};

}  // namespace sluice::scheduling
