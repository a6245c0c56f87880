// /admin/v1/drain (GET: where it stands; POST: stop admitting, 202 while
// draining, 200 once drained; DELETE: admit again) and POST
// /admin/v1/reload.
#include "admin/handlers.h"
#include "observe/log.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

// Where the drain stands, read on the dispatcher; `started`: a POST's
// answer, 202 while still draining.
void drain_state(HandlerContext& hc, bool started, Respond respond) {
  hc.on_dispatcher(
      [&ctx = hc.ctx, started](flowcontrol::Controller& c) {
        const std::size_t queued = c.queued();
        const std::size_t in_flight = ctx.in_flight();
        const bool draining = ctx.draining.load();
        const char* state = !draining                       ? "serving"
                            : queued == 0 && in_flight == 0 ? "drained"
                                                            : "draining";
        const int status = started && std::string_view(state) == "draining" ? 202 : 200;
        return AdminReply{status,
                          json{{"state", state}, {"queued", queued}, {"inFlight", in_flight}}.dump(
                              -1, ' ', false, kReplace)};
      },
      std::move(respond));
}

}  // namespace

void drain_status(HandlerContext& hc, const Request&, Respond respond) {
  drain_state(hc, false, std::move(respond));
}

void drain_start(HandlerContext& hc, const Request&, Respond respond) {
  if (!hc.ctx.draining.exchange(true))
    SLUICE_LOG(kInfo, "admin", "drain: no longer admitting; queued and in-flight requests finish");
  drain_state(hc, true, std::move(respond));
}

void drain_end(HandlerContext& hc, const Request&, Respond respond) {
  if (hc.ctx.shutting_down.load())
    return respond(
        error_reply(409, "shutting-down", "sluice is shutting down; it cannot admit again"));
  if (hc.ctx.draining.exchange(false)) SLUICE_LOG(kInfo, "admin", "drain ended: admitting again");
  drain_state(hc, false, std::move(respond));
}

void reload(HandlerContext& hc, const Request&, Respond respond) {
  hc.backend.reload([&hc, respond = std::move(respond)](ReloadResult r) mutable {
    AdminReply reply;
    if (!r.ok) {
      reply = error_reply(400, "invalid-config", r.error);
    } else {
      reply = AdminReply{200, json{{"status", "reloaded"},
                                   {"applied", r.applied},
                                   {"restartRequired", r.restart_needed}}
                                  .dump(-1, ' ', false, kReplace)};
    }
    hc.post([reply = std::move(reply), respond = std::move(respond)]() mutable {
      respond(std::move(reply));
    });
  });
}

}  // namespace sluice::admin
