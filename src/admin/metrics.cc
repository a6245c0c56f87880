// GET /metrics: the Prometheus exposition, GIE's names where they exist
// and llm-d's llm_d_epp_* twins beside them (metrics_llmd.cc), sluice's
// under sluice_. Rendered on the admin thread from copies: the I/O
// threads' request statistics, the flows (copied a chunk at a time), and the
// rest of flow control's state (DispatcherCopy, bounded in size), one
// section at a time in the order the exposition lists them.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "admin/handlers.h"
#include "admin/metrics_sections.h"
#include "admin/plugin_metrics.h"
#include "admin/program_aware_metrics.h"
#include "fleet/fleet_sync.h"
#include "observe/log.h"
#include "observe/metrics_text.h"
#include "proxy/proxy_context.h"
#include "proxy/tls_context.h"

namespace sluice::admin {

namespace {

void copy_dispatcher_state(flowcontrol::Controller& c, DispatcherCopy& copy) {
  copy.queue_durations = c.queue_durations();
  copy.pool_saturation = c.pool_saturation(flowcontrol::Clock::now());
  copy.flow_count = c.registry().flow_count();
  copy.flow_limit_rejections = c.registry().flow_limit_rejections();
  copy.ceilings = c.band_ceilings();
  copy.ceiling_holds = c.ceiling_holds();
  copy.headroom_holds = c.headroom_holds();
  copy.eviction = c.eviction_stats();
  copy_program_aware(c, copy.program_aware);
  flowcontrol::copy_plugin_metrics(c, copy.plugins);
  if (auto* s = c.scheduler()) {
    for (const auto& t : s->timings()) {
      TimingCopy tc{t->extension_point, t->type, t->name, {}, 0};
      for (std::size_t i = 0; i < tc.counts.size() && i < t->buckets.size(); ++i)
        tc.counts[i] = t->buckets[i].load(std::memory_order_relaxed);
      tc.sum_seconds = static_cast<double>(t->sum_ns.load()) / 1e9;
      copy.timings.push_back(std::move(tc));
    }
  }
}

// The endpoints' addresses, by slot.
std::vector<std::string> endpoint_addresses(proxy::ProxyContext& ctx) {
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < ctx.endpoints.size(); ++i)
    addresses.push_back(ctx.endpoints.at(i).config.address);
  return addresses;
}

// The I/O threads' request statistics, by endpoint address.
void render_requests(observe::MetricsText& m, proxy::ProxyContext& ctx,
                     const observe::ThreadStats& requests) {
  requests.render(m, endpoint_addresses(ctx));
  render_llmd_requests(m, requests);
}

// The dispatch decisions: pool saturation, band ceilings, holds, evictions.
void render_dispatch(observe::MetricsText& m, const DispatcherCopy& c) {
  render_saturation(m, c);
  if (!c.ceilings.empty()) {
    m.family("sluice_flow_control_band_ceiling", "gauge",
             "The usage-limit policy's dispatch ceiling per band at the last decision (a band "
             "dispatches while the pool saturation is below it).");
    for (const auto& b : c.ceilings)
      m.sample("sluice_flow_control_band_ceiling", {{"priority", std::to_string(b.priority)}},
               b.ceiling);
  }
  m.family("sluice_flow_control_ceiling_holds_total", "counter",
           "Times a band with queued requests was passed over because the pool saturation had "
           "reached its ceiling.");
  m.sample("sluice_flow_control_ceiling_holds_total", {}, static_cast<double>(c.ceiling_holds));
  m.family("sluice_flow_control_headroom_holds_total", "counter",
           "Times a lower band's request waited because flowControl.headroom kept the room for a "
           "protected band.");
  m.sample("sluice_flow_control_headroom_holds_total", {}, static_cast<double>(c.headroom_holds));
  m.family("sluice_flow_control_evictions_total", "counter",
           "In-flight evictions for higher bands: issued, confirmed (the evicted request stopped) "
           "and timed_out (given up waiting for that).");
  m.sample("sluice_flow_control_evictions_total", {{"result", "issued"}},
           static_cast<double>(c.eviction.issued));
  m.sample("sluice_flow_control_evictions_total", {{"result", "confirmed"}},
           static_cast<double>(c.eviction.confirmed));
  m.sample("sluice_flow_control_evictions_total", {{"result", "timed_out"}},
           static_cast<double>(c.eviction.timed_out));
}

// sluice's own admission limits: flows, connections, request-body bytes.
void render_admission(observe::MetricsText& m, const DispatcherCopy& c, proxy::ProxyContext& ctx) {
  m.family("sluice_flows", "gauge", "Live flows (fairness id x priority) in the registry.");
  m.sample("sluice_flows", {}, static_cast<double>(c.flow_count));
  m.family("sluice_flow_limit_rejections_total", "counter",
           "New flows refused at flowControl.maxFlows (every flow had work queued or in flight).");
  m.sample("sluice_flow_limit_rejections_total", {}, static_cast<double>(c.flow_limit_rejections));
  m.family("sluice_connections", "gauge",
           "Client connections open, by listener (at most server.maxConnections / "
           "server.adminMaxConnections).");
  m.sample("sluice_connections", {{"listener", "data"}},
           static_cast<double>(ctx.connections.open()));
  m.sample("sluice_connections", {{"listener", "admin"}},
           static_cast<double>(ctx.admin_connections.open()));
  m.family("sluice_connections_refused_total", "counter",
           "Connections answered 503 too-many-connections and closed, by listener.");
  m.sample("sluice_connections_refused_total", {{"listener", "data"}},
           static_cast<double>(ctx.connections.refused()));
  m.sample("sluice_connections_refused_total", {{"listener", "admin"}},
           static_cast<double>(ctx.admin_connections.refused()));
  m.family("sluice_jwks_loads_total", "counter",
           "JWKS documents loaded (auth.jwt), counted once every I/O thread verifies with "
           "them: at startup, on a change of the file, at each refresh of the URL, and on an "
           "unknown kid (at most one per jwksMinRefetchInterval).");
  m.sample("sluice_jwks_loads_total", {}, static_cast<double>(ctx.jwks_loads.load()));
  m.family("sluice_admin_key_writes_pending", "gauge",
           "Admin API key changes waiting for or being made by the key writer (at most "
           "auth.apiKeys.maxPendingWrites waiting).");
  m.sample("sluice_admin_key_writes_pending", {},
           static_cast<double>(ctx.key_writes_pending.load()));
  m.family("sluice_admin_key_writes_refused_total", "counter",
           "Admin API key changes answered 503 key-writes-busy.");
  m.sample("sluice_admin_key_writes_refused_total", {},
           static_cast<double>(ctx.key_writes_refused.load()));
  m.family("sluice_key_file_loads_total", "counter",
           "Loads of the key file (auth.apiKeys.file) at startup and on each change its "
           "watcher sees: ok (counted once every I/O thread holds the keys), failed (the "
           "keys in use stay).");
  m.sample("sluice_key_file_loads_total", {{"result", "ok"}},
           static_cast<double>(ctx.key_file_loads.load()));
  m.sample("sluice_key_file_loads_total", {{"result", "failed"}},
           static_cast<double>(ctx.key_file_load_failures.load()));
  m.family("sluice_request_body_bytes", "gauge",
           "Request-body bytes charged to server.maxBufferedBodyBytes now (bodies being read; "
           "with flow control off, also in flight until the answer starts; bodies up to 16 KiB "
           "are not charged).");
  m.sample("sluice_request_body_bytes", {}, static_cast<double>(ctx.body_budget.held()));
  m.family("sluice_request_body_budget_bytes", "gauge",
           "server.maxBufferedBodyBytes as it runs (the default: a quarter of the memory limit).");
  m.sample("sluice_request_body_budget_bytes", {}, static_cast<double>(ctx.body_budget.max()));
  m.family("sluice_request_body_budget_refused_total", "counter",
           "Requests answered 503 body-budget-exhausted.");
  m.sample("sluice_request_body_budget_refused_total", {},
           static_cast<double>(ctx.body_budget.refused()));
  m.family("sluice_admin_connections_displaced_total", "counter",
           "Admin connections without a whole request closed to make room for a new one at "
           "server.adminMaxConnections.");
  m.sample("sluice_admin_connections_displaced_total", {},
           static_cast<double>(ctx.admin_connections.displaced()));
}

// The dispatcher thread's work.
void render_dispatcher(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  m.family("sluice_dispatcher_wakeups_total", "counter", "Times the dispatcher thread woke up.");
  m.sample("sluice_dispatcher_wakeups_total", {}, static_cast<double>(ctx.flow_control->wakeups()));
  m.family("sluice_dispatcher_events_total", "counter",
           "Events the dispatcher handled (enqueue, cancel, completion, metrics, ...); per "
           "wake-up: its batch size.");
  m.sample("sluice_dispatcher_events_total", {}, static_cast<double>(ctx.flow_control->events()));
  m.family("sluice_dispatcher_released_total", "counter",
           "Requests the dispatcher released to endpoints.");
  m.sample("sluice_dispatcher_released_total", {},
           static_cast<double>(ctx.flow_control->released()));
}

// The fleet's sync with Redis (redis:); nothing without a fleet.
void render_fleet(observe::MetricsText& m, fleet::FleetSync* fleet) {
  if (!fleet) return;
  const fleet::FleetStatus st = fleet->status();
  m.family("sluice_fleet_connected", "gauge",
           "1 while the last sync with Redis succeeded (redis:), else 0.");
  m.sample("sluice_fleet_connected", {}, st.connected ? 1 : 0);
  m.family("sluice_fleet_degraded", "gauge",
           "1 while nothing was read from Redis for a lease: accounting is local.");
  m.sample("sluice_fleet_degraded", {}, st.degraded ? 1 : 0);
  m.family("sluice_fleet_syncs_total", "counter", "Successful syncs with Redis.");
  m.sample("sluice_fleet_syncs_total", {}, static_cast<double>(st.syncs));
  m.family("sluice_fleet_sync_failures_total", "counter",
           "Syncs that failed (Redis unreachable, slow, refused).");
  m.sample("sluice_fleet_sync_failures_total", {}, static_cast<double>(st.failures));
  m.family("sluice_fleet_replicas", "gauge",
           "Live replicas seen at the last sync, this one included.");
  m.sample("sluice_fleet_replicas", {}, static_cast<double>(st.replicas.size()));
  m.family("sluice_fleet_holds_total", "counter",
           "Dispatches held because another replica's flow was behind in fairness.");
  m.sample("sluice_fleet_holds_total", {}, static_cast<double>(st.holds));
  m.family("sluice_fleet_hold_overrides_total", "counter",
           "Holds given up after redis.maxHold with room left unused.");
  m.sample("sluice_fleet_hold_overrides_total", {}, static_cast<double>(st.hold_overrides));
  m.family("sluice_fleet_redis_commands_total", "counter", "Commands sent to Redis.");
  m.sample("sluice_fleet_redis_commands_total", {}, static_cast<double>(st.commands));
  m.family("sluice_fleet_duplicate_id", "gauge",
           "1 while another process syncs under this replica's id (redis.replicaId "
           "shared): neither counts the other's work.");
  m.sample("sluice_fleet_duplicate_id", {}, st.duplicate_id ? 1 : 0);
  m.family("sluice_fleet_duplicate_id_syncs_total", "counter",
           "Syncs that found another process's state under this replica's id.");
  m.sample("sluice_fleet_duplicate_id_syncs_total", {}, static_cast<double>(st.duplicate_id_syncs));
  m.family("sluice_fleet_operations_refused_total", "counter",
           "Changes made through another replica that this one refused (a key record it does "
           "not take, ...): the replicas differ; /admin/v1/fleet lists the last ones and why.");
  m.sample("sluice_fleet_operations_refused_total", {}, static_cast<double>(st.operations_refused));
  if (!st.quotas) return;
  m.family("sluice_quota_fleet_degraded", "gauge",
           "1 while quota leases have failed for a lease: quotas hold per replica by "
           "quota.failMode.");
  m.sample("sluice_quota_fleet_degraded", {}, st.quota.degraded ? 1 : 0);
  m.family("sluice_quota_lease_rounds_total", "counter", "Quota lease rounds run.");
  m.sample("sluice_quota_lease_rounds_total", {}, static_cast<double>(st.quota.rounds));
  m.family("sluice_quota_lease_failures_total", "counter",
           "Quota lease rounds that failed (Redis unreachable, a reply out of shape).");
  m.sample("sluice_quota_lease_failures_total", {}, static_cast<double>(st.quota.failures));
  m.family("sluice_quota_lease_scripts_total", "counter",
           "Quota lease scripts run in Redis (one per busy limit per round).");
  m.sample("sluice_quota_lease_scripts_total", {}, static_cast<double>(st.quota.scripts));
}

// Per endpoint: in flight, connect failures, ejections.
void render_endpoints(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  m.family("sluice_endpoint_in_flight", "gauge", "Requests sluice has in flight, by endpoint.");
  for (std::size_t i = 0; i < ctx.endpoints.size(); ++i)
    m.sample("sluice_endpoint_in_flight", {{"endpoint", ctx.endpoints.at(i).config.address}},
             ctx.endpoints.at(i).in_flight.load());
  m.family("sluice_endpoint_connect_failures_total", "counter",
           "Connections to an endpoint that failed.");
  for (std::size_t i = 0; i < ctx.endpoints.size(); ++i)
    m.sample("sluice_endpoint_connect_failures_total",
             {{"endpoint", ctx.endpoints.at(i).config.address}},
             static_cast<double>(ctx.endpoints.at(i).connect_failures.load()));
  m.family("sluice_endpoint_ejections_total", "counter",
           "Times an endpoint was ejected after consecutive failures (passive health).");
  for (std::size_t i = 0; i < ctx.endpoints.size(); ++i)
    m.sample("sluice_endpoint_ejections_total", {{"endpoint", ctx.endpoints.at(i).config.address}},
             static_cast<double>(ctx.endpoints.at(i).ejections.load()));
}

// The TLS listener (server.tls): handshakes by result, the certificate
// sets loaded after startup, and when the one served now expires.
void render_tls(observe::MetricsText& m, proxy::ProxyContext& ctx,
                const observe::ThreadStats& requests) {
  if (!ctx.tls) return;
  m.family("sluice_tls_handshakes_total", "counter",
           "TLS handshakes on the client listener: ok; failed (a version or cipher refused, "
           "plain HTTP, a missing or unverified client certificate, a reset); timeout "
           "(server.headerReadTimeout).");
  constexpr std::array<std::string_view, 3> kResults = {"ok", "failed", "timeout"};
  for (std::size_t i = 0; i < kResults.size(); ++i)
    m.sample("sluice_tls_handshakes_total", {{"result", kResults[i]}},
             static_cast<double>(requests.tls_handshakes[i]));
  m.family("sluice_tls_certificate_reloads_total", "counter",
           "Certificate sets loaded after startup (a reload, or the files changed), and sets that "
           "did not load (the running one kept serving).");
  m.sample("sluice_tls_certificate_reloads_total", {{"result", "ok"}},
           static_cast<double>(ctx.tls->reloads()));
  m.sample("sluice_tls_certificate_reloads_total", {{"result", "failed"}},
           static_cast<double>(ctx.tls->failures()));
  m.family("sluice_tls_certificate_expiry_timestamp_seconds", "gauge",
           "End of validity of the certificate new TLS connections get (Unix time).");
  m.sample("sluice_tls_certificate_expiry_timestamp_seconds", {},
           static_cast<double>(ctx.tls->current()->not_after()));
}

// What was lost on the way: log lines, and endpoint scrapes.
void render_losses(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  m.family("sluice_access_log_dropped_total", "counter",
           "Access-log lines lost: a thread's buffer was full, or the write failed.");
  m.sample("sluice_access_log_dropped_total", {}, static_cast<double>(ctx.access_log.dropped()));
  m.family("sluice_log_lines_dropped_total", "counter",
           "Log lines dropped because stderr was not read fast enough (1 MiB pending).");
  m.sample("sluice_log_lines_dropped_total", {}, static_cast<double>(log::dropped()));
  if (ctx.scraper) {
    m.family("sluice_metrics_scrape_failures_total", "counter",
             "Endpoint /metrics scrapes that failed (connect, TLS handshake or verification, "
             "timeout, status such as 401, nothing usable).");
    m.sample("sluice_metrics_scrape_failures_total", {},
             static_cast<double>(ctx.scraper->failures()));
    m.family("sluice_metrics_scrape_bad_lines_total", "counter",
             "Malformed lines skipped in scraped /metrics.");
    m.sample("sluice_metrics_scrape_bad_lines_total", {},
             static_cast<double>(ctx.scraper->bad_lines()));
  }
}

// Quotas (issue 41): each limit's spend, room and refusals on this
// replica; the limits of owners past metricsMaxFlows summed as "(other)", as the tenants' own
// series.
void render_quotas(observe::MetricsText& m, proxy::ProxyContext& ctx) {
  if (ctx.quotas.ledger().owners() == 0) return;
  const quota::Millis now = quota::unix_now_ms();
  const auto rows = ctx.quotas.rows({}, now, SIZE_MAX);
  const std::size_t shown = ctx.config.server.metrics_max_flows;
  struct Sums {
    double used = 0, remaining = 0, refused = 0, would = 0, waits = 0;
  };
  std::map<std::pair<std::string, std::string>, Sums> other;  // (kind, quota)
  std::vector<std::tuple<std::string_view, const quota::Quotas::Row*>> each;
  std::size_t owners = 0;
  std::string last;
  for (const auto& r : rows) {
    if (r.id != last) ++owners, last = r.id;
    if (owners <= shown) {
      each.emplace_back(r.key ? "key" : "tenant", &r);
      continue;
    }
    auto& s = other[{r.key ? "key" : "tenant", r.def.name}];
    const std::uint64_t spent = r.now.used + r.now.held;
    s.used += static_cast<double>(r.now.used);
    s.remaining += static_cast<double>(spent >= r.now.amount ? 0 : r.now.amount - spent);
    s.refused += static_cast<double>(r.now.refused);
    s.would += static_cast<double>(r.now.would_refuse);
    s.waits += static_cast<double>(r.now.lease_waits);
  }
  const std::array<std::pair<std::string_view, std::string_view>, 5> families{{
      {"sluice_quota_used",
       "Spent in the limit's current window (requests, tokens or micro-units)."},
      {"sluice_quota_remaining", "What the limit's window has room for beside what is held."},
      {"sluice_quota_refused_total", "Requests the limit refused (429)."},
      {"sluice_quota_shadow_refusals_total", "Requests a shadow limit would have refused."},
      {"sluice_quota_lease_waits_total",
       "Requests that waited for this replica's lease of a fleet limit (redis:) to grow."},
  }};
  for (std::size_t f = 0; f < families.size(); ++f) {
    m.family(families[f].first, f < 2 ? "gauge" : "counter", families[f].second);
    for (const auto& [kind, r] : each) {
      const std::uint64_t spent = r->now.used + r->now.held;
      const double v[5] = {static_cast<double>(r->now.used),
                           static_cast<double>(spent >= r->now.amount ? 0 : r->now.amount - spent),
                           static_cast<double>(r->now.refused),
                           static_cast<double>(r->now.would_refuse),
                           static_cast<double>(r->now.lease_waits)};
      m.sample(families[f].first, {{kind, r->id}, {"quota", r->def.name}}, v[f]);
    }
    for (const auto& [key, s] : other) {
      const double v[5] = {s.used, s.remaining, s.refused, s.would, s.waits};
      m.sample(families[f].first, {{key.first, "(other)"}, {"quota", key.second}}, v[f]);
    }
  }
}

std::string metrics_text(const DispatcherCopy& c, const FlowsSnapshot& flows,
                         proxy::ProxyContext& ctx, fleet::FleetSync* fleet,
                         const observe::ThreadStats& requests) {
  observe::MetricsText m;
  render_requests(m, ctx, requests);
  render_queues(m, c, flows, ctx.config.server.metrics_max_flows);
  render_dispatch(m, c);
  render_program_aware(m, c.program_aware, ctx.config.server.metrics_max_flows);
  render_pool(m, ctx);
  render_scheduler(m, c);
  render_plugin_metrics(m, c.plugins, endpoint_addresses(ctx));
  render_admission(m, c, ctx);
  render_quotas(m, ctx);
  render_tls(m, ctx, requests);
  render_dispatcher(m, ctx);
  render_fleet(m, fleet);
  render_endpoints(m, ctx);
  render_losses(m, ctx);
  return std::move(m.text());
}

}  // namespace

// The I/O threads' request statistics, then the flows (copied a chunk at a
// time), then the rest of flow control's state (a bounded copy); rendered
// here, never on the dispatcher.
void metrics(HandlerContext& hc, const Request&, Respond respond) {
  hc.backend.collect_stats([&hc, respond = std::move(respond)](observe::ThreadStats stats) mutable {
    auto requests = std::make_shared<observe::ThreadStats>(std::move(stats));
    hc.post([&hc, requests, respond = std::move(respond)]() mutable {
      hc.with_flows([&hc, requests, respond = std::move(respond)](
                        std::shared_ptr<const FlowsSnapshot> flows) mutable {
        auto copy = std::make_shared<DispatcherCopy>();
        hc.dispatch(
            [copy](flowcontrol::Controller& c) {
              try {  // on the dispatcher: a failure costs this scrape, not the process
                copy_dispatcher_state(c, *copy);
              } catch (const std::exception& e) {
                SLUICE_LOG(kError, "admin", "copying for /metrics failed: " << e.what());
                copy->failed = true;
              }
            },
            [&hc, copy, flows, requests, respond = std::move(respond)] {
              if (copy->failed)
                return respond(
                    error_reply(500, "internal-error", "the scrape failed; see the log"));
              respond(AdminReply{200, metrics_text(*copy, *flows, hc.ctx, hc.fleet(), *requests)});
            });
      });
    });
  });
}

}  // namespace sluice::admin
