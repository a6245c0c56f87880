#include "datalayer/endpoint_set.h"

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

}  // namespace sluice::datalayer
