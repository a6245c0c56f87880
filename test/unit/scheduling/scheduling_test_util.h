// Endpoints and requests for scheduling unit tests.
#pragma once

#include <deque>
#include <string>

#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling::testing {

struct Pool {
  std::deque<Endpoint> endpoints;  // stable addresses
  Endpoint& add(std::string address, Labels labels = {}) {
    Endpoint e;
    e.index = static_cast<std::uint32_t>(endpoints.size());
    e.address = std::move(address);
    e.labels = std::move(labels);
    e.metrics.update_time = Clock::now();
    e.stale = false;
    endpoints.push_back(std::move(e));
    return endpoints.back();
  }
  std::vector<const Endpoint*> all() const {
    std::vector<const Endpoint*> out;
    for (const auto& e : endpoints) out.push_back(&e);
    return out;
  }
  std::vector<Endpoint> copy() const { return {endpoints.begin(), endpoints.end()}; }
};

}  // namespace sluice::scheduling::testing
