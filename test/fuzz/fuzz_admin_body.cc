// The admin plane's request bodies and query parameters (admin/
// admin_requests.h): PUT /admin/v1/flows/{id}, PUT /admin/v1/bands/{p} and
// ?limit=. The first byte picks the parser, the rest is the body (or the
// target). Oracles: nothing throws; an error is a 4xx whose body is valid
// JSON with an error code; an accepted override or band holds only values
// inside the documented ranges.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "admin/admin_requests.h"
#include "finding.h"

namespace {

using sluice::admin::AdminReply;

[[noreturn]] void violation(const char* what) {
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}

void check_error(const AdminReply& r) {
  if (r.status < 400 || r.status >= 500) violation("an error reply is not a 4xx");
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("error") || !j["error"].contains("code"))
    violation("an error body is not {\"error\":{...,\"code\"}}");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 4;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (which == 0) {
      sluice::registry::FlowOverride before;
      before.weight = 2.0;
      AdminReply error;
      auto o = sluice::admin::parse_override(input, before, error);
      if (!o) {
        check_error(error);
      } else {
        if (o->weight && !(*o->weight >= 1e-6 && *o->weight <= 1e6))
          violation("weight out of range");
        if (o->priority && (*o->priority < -1000000 || *o->priority > 1000000))
          violation("priority out of range");
        if (o->max_queued && *o->max_queued == 0) violation("maxQueued 0 kept as a limit");
      }
    } else if (which == 1) {
      sluice::registry::BandConfig c;
      c.priority = 7;
      const sluice::registry::BandConfig before = c;
      AdminReply error;
      if (!sluice::admin::parse_band(input, c, error)) {
        check_error(error);
      } else {
        if (!(c.share >= 0 && c.share < 1) || std::signbit(c.share))
          violation("antiStarvationShare out of range");
        if (c.priority != before.priority) violation("a band body changed its priority");
      }
    } else if (which == 2) {
      // A band's priority in a path: canonical, so printing it back gives it.
      if (auto p = sluice::admin::parse_priority(input); p && std::to_string(*p) != input)
        violation("a priority accepted in a spelling that is not its own");
    } else {
      auto n = sluice::admin::limit_param(input, 1000, 4096);
      if (n && (*n == 0 || *n > 4096)) violation("limit out of range");
    }
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("an admin body parser", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("an admin body parser");
  }
  return 0;
}
