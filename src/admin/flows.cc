// /admin/v1/flows (GET: the busiest flows, from a copy) and
// /admin/v1/flows/{id} (GET; PUT: set the id's override; DELETE: remove
// it): read and changed on the dispatcher.
#include <algorithm>
#include <vector>

#include "admin/handlers.h"
#include "observe/log.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

json flow_json(const registry::FlowSummary& f, const flowcontrol::FairnessParams& prices,
               flowcontrol::TimePoint now) {
  json outcomes = json::object();
  for (int o = 1; o < kQueueOutcomeCount; ++o)
    if (f.stats.outcomes[o])
      outcomes[std::string(dropped_reason(static_cast<QueueOutcome>(o)))] = f.stats.outcomes[o];
  const auto& s = f.stats;
  return json{{"id", f.id},
              {"priority", f.priority},
              {"band", f.band},
              {"weight", f.weight},
              {"queued", f.queued},
              {"queuedBytes", f.bytes},
              {"inFlight", f.in_flight},
              {"dispatched", s.dispatched},
              {"completed", s.completed},
              {"outcomes", outcomes},
              {"inputTokens", s.input_tokens},
              {"outputTokens", s.output_tokens},
              {"tokensCharged",
               s.input_tokens * prices.input_price + s.output_tokens * prices.output_price},
              {"lastActiveMsAgo", ms_since(f.last_active, now)}};
}

json override_json(const registry::FlowOverride& o) {
  json j = json::object();
  if (o.weight) j["weight"] = *o.weight;
  if (o.priority) j["priority"] = *o.priority;
  if (o.max_queued) j["maxQueued"] = *o.max_queued;
  return j;
}

// The flows of one id (one per priority): a lookup per band, on the
// dispatcher.
json flows_json(flowcontrol::Controller& c, const std::string& id) {
  const auto now = flowcontrol::Clock::now();
  json out = json::array();
  for (const auto& [p, band] : c.registry().bands()) {
    if (const registry::Flow* f = band->flows().find(id))
      out.push_back(flow_json(registry::FlowRegistry::summarize(*f), c.fairness_prices(), now));
  }
  return out;
}

// The `n` busiest flows of a copy (queued, then in flight).
AdminReply busiest_flows(const FlowsSnapshot& snap, std::size_t n) {
  std::vector<const registry::FlowSummary*> order;
  order.reserve(snap.flows.size());
  for (const auto& f : snap.flows) order.push_back(&f);
  auto busier = [](const registry::FlowSummary* a, const registry::FlowSummary* b) {
    if (a->queued != b->queued) return a->queued > b->queued;
    if (a->in_flight != b->in_flight) return a->in_flight > b->in_flight;
    if (a->id != b->id) return a->id < b->id;
    return a->priority > b->priority;
  };
  const std::size_t shown = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    busier);
  json out = json::array();
  for (std::size_t i = 0; i < shown; ++i)
    out.push_back(flow_json(*order[i], snap.prices, snap.taken));
  AdminReply r{200, out.dump(-1, ' ', false, kReplace)};
  r.total = snap.flows.size();
  return r;
}

}  // namespace

// The busiest flows first, at most ?limit= (default 1000); x-total-count
// says how many there are.
void list_flows(HandlerContext& hc, const Request& req, Respond respond) {
  auto limit = limit_param(req.target, 1000, 1000000);
  if (!limit)
    return respond(
        error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 1000000"));
  hc.with_flows(
      [n = *limit, respond = std::move(respond)](std::shared_ptr<const FlowsSnapshot> snap) {
        respond(busiest_flows(*snap, n));
      });
}

void get_flow(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [id = std::string(req.param)](flowcontrol::Controller& c) {
        const auto& ov = c.registry().overrides();
        auto it = ov.find(id);
        json flows = flows_json(c, id);
        if (flows.empty() && it == ov.end() && !c.registry().has_configured_weight(id))
          return error_reply(404, "unknown-flow", "no flow '" + id + "'");
        return AdminReply{
            200, json{{"id", id},
                      {"override", it == ov.end() ? json::object() : override_json(it->second)},
                      {"flows", flows}}
                     .dump(-1, ' ', false, kReplace)};
      },
      std::move(respond));
}

void put_flow(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [id = std::string(req.param), body = req.body,
       replicated = req.replicated](flowcontrol::Controller& c) {
        auto& reg = c.registry();
        const auto& ov = reg.overrides();
        auto it = ov.find(id);
        // From another replica: the flow may not have reached this one yet.
        if (!replicated && flows_json(c, id).empty() && it == ov.end() &&
            !reg.has_configured_weight(id))
          return error_reply(404, "unknown-flow", "no flow '" + id + "'");
        AdminReply error;
        auto o =
            parse_override(body, it == ov.end() ? registry::FlowOverride{} : it->second, error);
        if (!o) return error;
        reg.set_flow_override(id, *o, flowcontrol::Clock::now());
        SLUICE_LOG(
            kInfo, "admin",
            "flow " << id << " override set: " << override_json(*o).dump(-1, ' ', false, kReplace));
        return AdminReply{
            200,
            json{{"id", id}, {"override", override_json(*o)}, {"flows", flows_json(c, id)}}.dump(
                -1, ' ', false, kReplace)};
      },
      std::move(respond));
}

void delete_flow(HandlerContext& hc, const Request& req, Respond respond) {
  hc.on_dispatcher(
      [id = std::string(req.param)](flowcontrol::Controller& c) {
        auto& reg = c.registry();
        if (!reg.overrides().count(id))
          return error_reply(404, "unknown-flow", "flow '" + id + "' has no override");
        reg.clear_flow_override(id, flowcontrol::Clock::now());
        SLUICE_LOG(kInfo, "admin", "flow " << id << " override removed");
        return AdminReply{
            200, json{{"id", id}, {"override", json::object()}, {"flows", flows_json(c, id)}}.dump(
                     -1, ' ', false, kReplace)};
      },
      std::move(respond));
}

}  // namespace sluice::admin
