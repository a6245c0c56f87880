// The admin plane's route handlers (private to src/admin), one file per
// resource. Each answers through `respond` exactly once, on the admin
// thread.
#pragma once

#include "admin/handler_context.h"

namespace sluice::admin {

// metrics.cc: the Prometheus exposition.
void metrics(HandlerContext& hc, Respond respond);

}  // namespace sluice::admin
