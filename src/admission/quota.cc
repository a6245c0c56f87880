#include "admission/quota.h"

#include <algorithm>

namespace sluice::admission {

quota::Usage quota_worst_case(const Request& r, std::uint64_t default_output_tokens) {
  quota::Usage u;
  std::uint64_t output = default_output_tokens;
  if (r.identity.policy && r.identity.policy->max_tokens > 0)
    output = r.identity.policy->max_tokens;
  // Input: the larger of sluice's estimate of the prompt and a quarter of
  // the body's bytes (text the estimate does not read, tools and schemas,
  // is input too); settled to the engine's count when it reports one.
  u.input_tokens = r.head.body.size() / 4;
  if (r.body) {
    u.input_tokens = std::max<std::uint64_t>(u.input_tokens, r.body->estimated_input_tokens);
    if (r.body->max_tokens)
      output = static_cast<std::uint64_t>(std::max<std::int64_t>(0, *r.body->max_tokens));
  }
  // Each of the answers it asks for (n, best_of; for each prompt of a
  // batch) may be that long.
  if (r.body)
    for (const std::uint64_t k : {r.body->choices, r.body->prompts})
      if (k > 1)
        output = k > UINT64_MAX / std::max<std::uint64_t>(output, 1) ? UINT64_MAX : output * k;
  // An embedding produces no tokens.
  u.output_tokens = r.route == protocol::Route::kEmbeddings ? 0 : output;
  return u;
}

namespace {

std::string_view measure_name(quota::Measure m) {
  switch (m) {
    case quota::Measure::kRequests:
      return "requests";
    case quota::Measure::kInputTokens:
      return "input tokens";
    case quota::Measure::kOutputTokens:
      return "output tokens";
    case quota::Measure::kTokens:
      return "tokens";
    case quota::Measure::kCost:
      return "cost";
  }
  return "tokens";
}

std::string period_text(const quota::Period& p) {
  if (p.calendar == quota::Calendar::kDay) return "per UTC day";
  if (p.calendar == quota::Calendar::kMonth) return "per UTC month";
  return "per " + go_duration(p.window);
}

}  // namespace

flowcontrol::ErrorAnswer quota_refused(const quota::Refusal& r) {
  flowcontrol::ErrorAnswer a;
  if (r.unavailable) {
    // A fleet limit, Redis unreachable, quota.failMode closed.
    a.status = 503;
    a.code = "quota_unavailable";
    a.reason = "quota-unavailable";
    a.retry_after_seconds = 1;
    a.body = flowcontrol::openai_error_body(
        "quota '" + r.limit.name + "' of " + r.owner +
            " is held across the fleet and its store is unreachable; retry shortly",
        "server_error", a.code);
    return a;
  }
  a.status = 429;
  const bool never = !r.retry_after;
  const bool insufficient = r.insufficient || never;
  a.code = insufficient ? "insufficient_quota" : "rate_limit_exceeded";
  a.reason = insufficient ? "quota-exhausted" : "quota-exceeded";
  std::string message =
      "quota '" + r.limit.name + "' of " + r.owner + " (" + std::to_string(r.limit.amount) + " " +
      std::string(measure_name(r.limit.measure)) + " " + period_text(r.limit.period) + ") ";
  if (never)
    message += "is smaller than this request's worst case; ask for fewer tokens";
  else if (r.lease_short)
    message +=
        "is held across the fleet, and this replica's share of it is being refilled; "
        "retry in " +
        go_duration(*r.retry_after);
  else
    message += "has no room for this request now; retry in " + go_duration(*r.retry_after);
  a.body = flowcontrol::openai_error_body(message, insufficient ? "insufficient_quota" : "requests",
                                          a.code);
  if (insufficient) {
    a.headers.emplace_back("x-should-retry", "false");
  }
  if (r.retry_after) {
    a.retry_after_seconds = static_cast<int>(std::min<quota::Millis>(
        (std::max<quota::Millis>(*r.retry_after, 1) + 999) / 1000, 31LL * 86'400));
    a.headers.emplace_back("retry-after-ms",
                           std::to_string(std::max<quota::Millis>(*r.retry_after, 1)));
  }
  return a;
}

flowcontrol::ErrorAnswer quota_capacity_refused() {
  flowcontrol::ErrorAnswer a;
  a.status = 503;
  a.code = "quota_capacity";
  a.reason = "quota-capacity";
  a.retry_after_seconds = 1;
  a.body = flowcontrol::openai_error_body(
      "sluice counts as many tenants' quotas as it may hold; retry shortly", "server_error",
      a.code);
  return a;
}

void rate_limit_headers(const quota::Headroom& h,
                        std::vector<std::pair<std::string_view, std::string>>& out) {
  if (h.requests.present) {
    out.emplace_back("x-ratelimit-limit-requests", std::to_string(h.requests.limit));
    out.emplace_back("x-ratelimit-remaining-requests", std::to_string(h.requests.remaining));
    out.emplace_back("x-ratelimit-reset-requests", go_duration(h.requests.reset_after));
  }
  if (h.tokens.present) {
    out.emplace_back("x-ratelimit-limit-tokens", std::to_string(h.tokens.limit));
    out.emplace_back("x-ratelimit-remaining-tokens", std::to_string(h.tokens.remaining));
    out.emplace_back("x-ratelimit-reset-tokens", go_duration(h.tokens.reset_after));
  }
}

void append_rate_limit_lines(const quota::Headroom& h, std::string& out) {
  auto line = [&out](std::string_view name, std::string_view value) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  };
  char digits[24];
  auto number = [&digits](std::uint64_t v) {
    char* end = digits + sizeof(digits);
    char* p = end;
    do {
      *--p = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    return std::string_view(p, static_cast<std::size_t>(end - p));
  };
  if (h.requests.present) {
    line("x-ratelimit-limit-requests", number(h.requests.limit));
    line("x-ratelimit-remaining-requests", number(h.requests.remaining));
    line("x-ratelimit-reset-requests", go_duration(h.requests.reset_after));
  }
  if (h.tokens.present) {
    line("x-ratelimit-limit-tokens", number(h.tokens.limit));
    line("x-ratelimit-remaining-tokens", number(h.tokens.remaining));
    line("x-ratelimit-reset-tokens", go_duration(h.tokens.reset_after));
  }
}

std::string go_duration(quota::Millis ms) {
  if (ms <= 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  const quota::Millis h = ms / 3'600'000;
  const quota::Millis m = ms / 60'000 % 60;
  const quota::Millis s = ms / 1000 % 60;
  const quota::Millis frac = ms % 1000;
  if (h > 0) out += std::to_string(h) + "h";
  if (h > 0 || m > 0) out += std::to_string(m) + "m";
  out += std::to_string(s);
  if (frac > 0) {
    std::string f = std::to_string(frac + 1000).substr(1);  // three digits
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  out += "s";
  return out;
}

}  // namespace sluice::admission
