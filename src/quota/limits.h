// What quotas are made of, as values (issue 41): a limit's definition, a
// request's usage and price, what a refused request is told and the
// headroom OpenAI's headers report. Pure: admission (which computes a
// request's worst case and renders the answers) includes this, not the
// ledger's locks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quota/window.h"

namespace sluice::quota {

enum class Measure : std::uint8_t { kRequests, kInputTokens, kOutputTokens, kTokens, kCost };
// The two kinds OpenAI's headers report: requests, and tokens of any measure.
enum class Kind : std::uint8_t { kRequests, kTokens, kCost };
Kind kind_of(Measure m);

struct LimitDef {
  std::string name;
  Measure measure = Measure::kTokens;
  std::uint64_t amount = 0;  // requests, tokens, or micro-units of cost
  Period period;
  bool shadow = false;
  bool queue = false;               // onExceeded: queue (else refuse)
  std::vector<std::string> models;  // exact or "prefix*"; empty: every model
  bool applies_to(std::string_view model) const;
  bool operator==(const LimitDef&) const = default;
};

// Tokens, and what a million of each costs (micro-units).
struct Usage {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
};
struct Price {
  std::uint64_t input_per_million = 0;
  std::uint64_t output_per_million = 0;
};
// What `u` (and one request) amounts to in `m`; cost rounded up.
std::uint64_t amount_of(Measure m, const Usage& u, const Price& p, bool dispatched = true);

// What a refused request is told: the limit, and when it would fit
// (nullopt: never: a request larger than the limit).
struct Refusal {
  std::string owner;
  LimitDef limit;
  std::optional<Millis> retry_after;  // ms from now
  // A cost or calendar limit: OpenAI's insufficient_quota, not a rate.
  bool insufficient = false;
  // A fleet limit this replica holds too small a lease of, while the fleet
  // has room (the next sync asks for more: worth waiting one sync for).
  bool lease_short = false;
  // A fleet limit with Redis unreachable and quota.failMode closed (503).
  bool unavailable = false;
};

// The tightest enforced limit of each kind after a reservation, for
// OpenAI's x-ratelimit-* headers.
struct Headroom {
  struct Of {
    bool present = false;
    std::uint64_t limit = 0, remaining = 0;
    Millis reset_after = 0;  // ms until the window holds nothing
  };
  Of requests, tokens;
};

}  // namespace sluice::quota
