// inflight-load-producer (llm-d): the load each endpoint carries in tokens
// — the prompt tokens of the requests in flight on it that it had not
// cached when they were sent (plus, with addEstimatedOutputTokens, an
// estimate of their output) — and what one more request would add there.
// token-load-scorer and prefix-cache-affinity-filter read it; the request
// counts llm-d keeps beside it are sluice's own Endpoint::in_flight.
//
// llm-d: pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload.
// A request's tokens on an endpoint are its input tokens the endpoint has
// not cached: (hashed blocks - matched blocks) x block size, plus the
// prompt beyond the hashed blocks; without a prefix producer, all of its
// input tokens. Charged at dispatch on every endpoint that serves it (decode
// and, in P/D, prefill), released when the response ends.
//
// One writer: the dispatcher thread (pre_request at dispatch,
// response_complete at the end, the scorers in the cycle). The counters
// are a vector by endpoint slot: bounded by the pool.
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
  // What `request` adds on an endpoint holding `matched` of its `total`
  // hashed blocks: its uncached input tokens (+ estimated output).
  std::uint64_t request_tokens(const Request& request, std::uint64_t matched,
                               std::uint64_t total) const;
  // out[i] = tokens in flight on slots[i] + what `request` adds there
  // (llm-d's InFlightLoad.Tokens + UncachedRequestTokens). No allocation
  // per endpoint: a scratch by slot kept between cycles.
  void token_load(CycleState& cycle, const Request& request, std::span<const std::uint32_t> slots,
                  std::span<double> out);
  ApproxPrefixCacheProducer* prefix() const { return prefix_; }

  void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) override;
  void response_complete(CycleState& cycle, const Request& request, std::uint32_t endpoint_index,
                         std::uint64_t output_tokens) override;

 private:
  struct Charges {
    std::array<std::pair<std::uint32_t, std::uint64_t>, 4> slot_tokens{};
    std::uint32_t n = 0;
  };
  // Matched blocks by slot for the request's match (scratch, cleared after).
  void fill_by_slot(const PrefixMatch& m);
  void clear_by_slot(const PrefixMatch& m);

  InFlightLoadParams params_;
  ApproxPrefixCacheProducer* prefix_;
  std::vector<std::uint64_t> tokens_;   // by endpoint slot
  std::vector<std::uint32_t> by_slot_;  // scratch
  CycleKey<Charges> charges_key_;
};

}  // namespace sluice::scheduling
