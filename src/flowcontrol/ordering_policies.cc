#include "flowcontrol/ordering_policies.h"

namespace sluice::flowcontrol {

std::unique_ptr<OrderingPolicy> make_ordering_policy(const std::string& type) {
  if (type == "fcfs-ordering-policy") return std::make_unique<FcfsOrdering>();
  if (type == "edf-ordering-policy") return std::make_unique<EdfOrdering>();
  if (type == "slo-deadline-ordering-policy") return std::make_unique<SloDeadlineOrdering>();
  return nullptr;
}

}  // namespace sluice::flowcontrol
