#include "admission/steering.h"

#include <string>

#include "protocol/steering.h"

namespace sluice::admission {

using flowcontrol::client_error;

Verdict check_steering(const Request& r, std::size_t max_fairness_id_bytes) {
  const protocol::RequestHead& head = r.head;
  if (!head.repeated_steering.empty())
    return Verdict::refuse(client_error(400, "repeated-steering-header",
                                        "the steering header " + head.repeated_steering +
                                            " was sent more than once; send each at most once"));
  const std::size_t max_id = max_fairness_id_bytes;
  if (!head.fairness_id.empty() && !protocol::is_valid_steering_value(head.fairness_id, max_id))
    return Verdict::refuse(client_error(
        400, "invalid-fairness-id",
        "the fairness id (x-llm-d-inference-fairness-id or "
        "x-gateway-inference-fairness-id) must be 1 to " +
            std::to_string(max_id) + " token characters (letters, digits, !#$%&'*+-.^_`|~:/@=)"));
  if (!head.objective.empty() && !protocol::is_valid_steering_value(head.objective, max_id))
    return Verdict::refuse(client_error(400, "invalid-objective",
                                        "the objective (x-llm-d-inference-objective or "
                                        "x-gateway-inference-objective) must be 1 to " +
                                            std::to_string(max_id) + " token characters"));
  return Verdict::go_on();
}

}  // namespace sluice::admission
