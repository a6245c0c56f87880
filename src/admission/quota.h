// Admission's quota step (issue 41, item 2), between the tenant's checks
// and flow control, in the tenant step's shape: decide (what a request
// reserves: quota_worst_case), take from shared state (the caller reserves
// it in quota::Ledger and holds the Reservation until the request ends),
// answer (quota_refused, and OpenAI's x-ratelimit-* headers on any answer:
// rate_limit_headers). Pure: the ledger's locks are the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "admission/request.h"
#include "quota/limits.h"

namespace sluice::admission {

// What a request reserves: its input estimate, and as output the largest
// of the body's max_tokens, max_completion_tokens and max_output_tokens
// (whichever the engine honours, the largest holds), else its tenant's (or
// key's) maxTokens, else `default_output_tokens`; an embedding none. A
// request with no parsed body (passthrough) reserves its estimate and the
// fallbacks.
quota::Usage quota_worst_case(const Request& r, std::uint64_t default_output_tokens);

// 429 for a refused reservation: rate_limit_exceeded with Retry-After
// (seconds, rounded up) and retry-after-ms; a spent cost or calendar limit
// is insufficient_quota with x-should-retry: false (OpenAI's SDKs retry a
// 429 otherwise), as is a request larger than a limit (it never fits).
flowcontrol::ErrorAnswer quota_refused(const quota::Refusal& r);

// 503 quota-capacity: the books have no room to count another tenant
// (quota's owner table is full of tenants with spend in their windows).
flowcontrol::ErrorAnswer quota_capacity_refused();

// OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens} for the
// tightest enforced limit of each kind (none when no limit of a kind
// applies).
void rate_limit_headers(const quota::Headroom& h,
                        std::vector<std::pair<std::string_view, std::string>>& out);

// The same as header lines ("name: value\r\n") appended to `out`, for
// a relayed answer's head (no allocation beyond `out`'s growth).
void append_rate_limit_lines(const quota::Headroom& h, std::string& out);

// A duration as Go's time.Duration.String writes it at millisecond
// precision, as OpenAI's reset headers do: "20ms", "1s", "1.5s", "6m0s",
// "1h2m3.004s"; "0s" for 0 or less.
std::string go_duration(quota::Millis ms);

}  // namespace sluice::admission
