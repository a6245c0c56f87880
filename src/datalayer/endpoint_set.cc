#include "datalayer/endpoint_set.h"

namespace sluice::datalayer {

EndpointSet::EndpointSet(const std::vector<config::EndpointConfig>& configs) {
  endpoints_.reserve(configs.size());
  for (const auto& c : configs) endpoints_.push_back(std::make_unique<EndpointState>(c));
}

}  // namespace sluice::datalayer
