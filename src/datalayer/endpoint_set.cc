#include "datalayer/endpoint_set.h"

#include <algorithm>

namespace sluice::datalayer {

EndpointSet::EndpointSet(const std::vector<config::EndpointConfig>& configs)
    : slots_(std::make_unique<std::unique_ptr<EndpointState>[]>(kMaxEndpoints)) {
  std::size_t n = 0;
  for (const auto& c : configs)
    if (n < kMaxEndpoints) slots_[n++] = std::make_unique<EndpointState>(c);
  size_.store(n, std::memory_order_release);
}

int EndpointSet::find(const std::string& address) const {
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i)
    if (slots_[i]->config.address == address) return static_cast<int>(i);
  return -1;
}

int EndpointSet::add(const config::EndpointConfig& c,
                     const boost::asio::ip::tcp::endpoint& resolved) {
  if (int i = find(c.address); i >= 0) {
    // Readers may look at config concurrently: a revived endpoint keeps
    // the config it was first added with (same address, same server).
    slots_[static_cast<std::size_t>(i)]->removed.store(false, std::memory_order_relaxed);
    return i;
  }
  const std::size_t n = size();
  if (n >= kMaxEndpoints) return -1;
  slots_[n] = std::make_unique<EndpointState>(c);
  slots_[n]->resolved = resolved;
  size_.store(n + 1, std::memory_order_release);
  return static_cast<int>(n);
}

FailureVerdict EndpointSet::record_failure(std::size_t slot, Clock::time_point now,
                                           const EjectionPolicy& policy,
                                           std::chrono::nanoseconds* backoff) {
  EndpointState& ep = *slots_[slot];
  const std::uint32_t failures =
      ep.consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (policy.consecutive_failures == 0 || failures < policy.consecutive_failures)
    return FailureVerdict::kCounted;
  // Requests that were in flight when it was ejected fail too: one ejection.
  if (ep.down_until_ns.load(std::memory_order_relaxed) > now.time_since_epoch().count())
    return FailureVerdict::kCounted;
  bool others = false;
  const std::size_t n = size();
  for (std::size_t i = 0; i < n && !others; ++i) others = i != slot && slots_[i]->usable(now);
  if (!others) return FailureVerdict::kSpared;
  const std::uint32_t k = std::min<std::uint32_t>(
      ep.ejections_in_a_row.load(std::memory_order_relaxed), 30);  // 2^30 x base >= any cap
  const auto scaled = policy.base_time.count() > policy.max_time.count() >> k
                          ? policy.max_time
                          : std::min(policy.max_time, policy.base_time * (std::int64_t{1} << k));
  if (!ep.skip_until(now + scaled)) return FailureVerdict::kCounted;  // another thread did
  ep.ejections_in_a_row.fetch_add(1, std::memory_order_relaxed);
  ep.ejections.fetch_add(1, std::memory_order_relaxed);
  if (backoff) *backoff = scaled;
  return FailureVerdict::kEjected;
}

}  // namespace sluice::datalayer
