// /admin/v1/bands (GET: every band) and /admin/v1/bands/{priority} (GET,
// PUT: add or change, DELETE: remove a configured band): read and changed
// on the dispatcher.
#include "admin/handlers.h"
#include "observe/log.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

json band_json(const registry::Band& b, const flowcontrol::Controller& c) {
  const auto& bc = b.config();
  json j{{"priority", b.priority()},
         {"configured", b.configured()},
         {"maxBytes", bc.max_bytes},
         {"maxRequests", bc.max_requests},
         {"fairnessPolicy", bc.fairness},
         {"orderingPolicy", bc.ordering},
         {"antiStarvationShare", bc.share},
         {"queued", b.requests()},
         {"queuedBytes", b.bytes()},
         {"flows", b.flows().size()},
         {"backloggedFlows", b.backlogged_flows()}};
  // The usage-limit policy's ceiling at the last dispatch decision.
  for (const auto& bc2 : c.band_ceilings())
    if (bc2.priority == b.priority()) j["ceiling"] = bc2.ceiling;
  return j;
}

registry::Band* find_band(flowcontrol::Controller& c, int priority) {
  auto& bands = c.registry().bands();
  auto it = bands.find(priority);
  return it == bands.end() ? nullptr : it->second.get();
}

// {priority}, which check_priority let through.
int priority_of(const Request& req) { return *parse_priority(req.param); }

}  // namespace

std::optional<AdminReply> check_priority(std::string_view param) {
  if (parse_priority(param)) return std::nullopt;
  return error_reply(400, "invalid-priority",
                     "band priority must be a whole number written without leading "
                     "zeros or a sign on 0, got '" +
                         std::string(param) + "'");
}

void list_bands(HandlerContext& hc, const Request&, Respond respond) {
  hc.on_dispatcher(
      [](flowcontrol::Controller& c) {
        json out = json::array();
        for (const auto& [p, b] : c.registry().bands()) out.push_back(band_json(*b, c));
        return AdminReply{200, out.dump(-1, ' ', false, kReplace)};
      },
      std::move(respond));
}

void get_band(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [priority = priority_of(req)](flowcontrol::Controller& c) {
        registry::Band* b = find_band(c, priority);
        if (!b)
          return error_reply(404, "unknown-band",
                             "no band with priority " + std::to_string(priority));
        return AdminReply{200, band_json(*b, c).dump(-1, ' ', false, kReplace)};
      },
      std::move(respond));
}

void put_band(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [priority = priority_of(req), body = req.body](flowcontrol::Controller& c) {
        registry::Band* b = find_band(c, priority);
        registry::BandConfig bc = b ? b->config() : c.registry().config().default_band;
        bc.priority = priority;
        AdminReply error;
        if (!parse_band(body, bc, error)) return error;
        c.registry().set_band(bc, flowcontrol::Clock::now());
        SLUICE_LOG(kInfo, "admin", "band " << priority << (b ? " changed" : " added"));
        return AdminReply{200,
                          band_json(*find_band(c, priority), c).dump(-1, ' ', false, kReplace)};
      },
      std::move(respond));
}

void delete_band(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [priority = priority_of(req)](flowcontrol::Controller& c) {
        registry::Band* b = find_band(c, priority);
        if (!b || !b->configured())
          return error_reply(404, "unknown-band",
                             "no configured band with priority " + std::to_string(priority));
        c.registry().remove_band(priority, flowcontrol::Clock::now());
        SLUICE_LOG(
            kInfo, "admin",
            "band " << priority
                    << " removed; its queued requests stay, under the default band's settings");
        return AdminReply{
            200, json{{"priority", priority}, {"removed", true}}.dump(-1, ' ', false, kReplace)};
      },
      std::move(respond));
}

}  // namespace sluice::admin
