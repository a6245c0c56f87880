// What the data plane's threads share, read-mostly: the startup config, the
// endpoint pool, the dispatcher, the limits; and what each request reads
// that a reload can change (RequestPolicy).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "admission/objectives.h"
#include "auth/authenticator.h"
#include "config/config.h"
#include "datalayer/endpoint_set.h"
#include "datalayer/metrics_scraper.h"
#include "datalayer/model_catalog.h"
#include "flowcontrol/controller_shell.h"
#include "flowcontrol/saturation_detectors.h"
#include "observe/access_log.h"
#include "proxy/body_budget.h"
#include "proxy/connection_limit.h"
#include "proxy/quota_policy.h"
#include "proxy/tenant_load.h"

namespace sluice::datalayer {
struct UpstreamTlsSet;
}

namespace sluice::proxy {

class TlsCredentials;

// An objective's priority and TTL (admission/objectives.h: admission's
// steps read them).
using ObjectiveInfo = admission::ObjectiveInfo;

// What an I/O thread reads per request that a config reload can change.
// Immutable once built; each I/O thread holds its own reference, replaced on
// its own thread (no lock, no shared write).
struct RequestPolicy {
  explicit RequestPolicy(const config::Config& c);
  admission::Objectives objectives;
  // agent-identity's session headers, in order (config::Config's); empty:
  // the plugin is not declared.
  std::vector<std::string> agent_session_headers;
  // What the I/O thread computes for the scheduler (prefix hashing).
  scheduling::RequestPreparation preparation;
  // Without the gate, GIE's legacy admission: a sheddable request (priority
  // < 0) is rejected while no endpoint has room by this detector.
  std::unique_ptr<flowcontrol::SaturationDetector> legacy_detector;
  // With the gate, the same detector the dispatcher gates on, applied by the
  // I/O thread to the endpoint a dispatched request actually goes to (the
  // dispatcher does not see fallbacks, ejections or refused connections):
  // nothing is sent to an endpoint without room by sluice's own in-flight
  // count.
  std::unique_ptr<flowcontrol::SaturationDetector> room_detector;
  // The model servers' credentials (server.upstreamCredentialFile,
  // endpoints[].credentialFile), as this config's load read them.
  std::shared_ptr<const config::UpstreamCredentials> credentials;
  // TLS towards the model servers (datalayer/upstream_tls.h): built from the
  // same config by whoever makes the policy (its files read off the I/O
  // threads); null or empty: plain HTTP everywhere.
  std::shared_ptr<const datalayer::UpstreamTlsSet> upstream_tls;
  // requestHandler (config::RequestHandlerSpec): the OpenAI paths parsed,
  // other paths (or, without openai-parser, every inference path) taken
  // unparsed by passthrough-parser, the band's priority in every body.
  bool parse_openai = true;
  bool passthrough = false;
  bool propagate_priority = false;
  // tenants[].quotas and quota: (issue 41); null: no tenant has a quota.
  std::shared_ptr<const quota::QuotaPolicy> quotas;
};

// Read-mostly state shared by all I/O threads.
struct ProxyContext {
  explicit ProxyContext(const config::Config& c);
  ~ProxyContext();
  // The startup config. Its server: section is what runs (a reload cannot
  // change it); the rest is replaced by reloads (see Server::reload).
  config::Config config;
  datalayer::EndpointSet endpoints;             // grows at runtime (endpoints file, reload)
  std::shared_ptr<const RequestPolicy> policy;  // the startup one; workers hold theirs
  // Who requests are (auth:, tenants:, the keys): the startup one, without
  // keys until the app loads them; workers hold theirs.
  std::shared_ptr<const auth::Authenticator> authenticator;
  // Each tenant's requests in flight, for tenants[].maxConcurrency.
  TenantLoad tenant_load;
  // Quotas' books (tenants[].quotas, keys' own): configured with each
  // config's policy before the I/O threads get it, and with the keys.
  quota::Quotas quotas;
  // A JWT named a key the JWKS lacks: the JWKS is asked for again. The
  // flag is set by the first such request and cleared by the fetcher once
  // it took the request (so a flood of them is one call); the callback is
  // set before start() and posts to the fetcher's thread.
  std::atomic<bool> jwks_refetch_wanted{false};
  // JWKS documents read (file or URL), counted once every I/O thread uses them.
  std::atomic<std::uint64_t> jwks_loads{0};
  // The key file's watcher: each change it saw, loaded or refused (a
  // refused file keeps the keys in use).
  std::atomic<std::uint64_t> key_file_loads{0};
  std::atomic<std::uint64_t> key_file_load_failures{0};
  // The admin API's key changes waiting for or being made by the key
  // writer (app/key_writer.h), and those refused because too many waited.
  std::atomic<std::uint64_t> key_writes_pending{0};
  std::atomic<std::uint64_t> key_writes_refused{0};
  // The pool's models (datalayer/model_catalog.h), polled with auth: on,
  // for a restricted tenant's GET /v1/models; null until then.
  std::atomic<std::shared_ptr<const datalayer::ModelCatalog>> models;
  std::function<void()> on_jwks_refetch;
  void want_jwks_refetch() {
    if (on_jwks_refetch && !jwks_refetch_wanted.exchange(true, std::memory_order_acq_rel))
      on_jwks_refetch();
  }
  // The dispatcher: flow control (featureGates: [flowControl]) and the
  // scheduler; without the gate it only schedules, dispatching at once.
  std::unique_ptr<flowcontrol::ControllerShell> flow_control;
  bool gated = false;  // featureGates: [flowControl]
  // metrics-data-source's `path` (GIE), where endpoints serve metrics.
  std::string metrics_path = "/metrics";
  // The data layer's scraper (its counters, for /metrics); set by bind().
  const datalayer::MetricsScraper* scraper = nullptr;
  bool pool_saturated(const flowcontrol::SaturationDetector& detector) const;
  std::atomic<bool> shutting_down{false};
  // Drain (admin) or shutdown: new inference requests are turned away (503
  // `draining`); what is queued and in flight finishes.
  std::atomic<bool> draining{false};
  observe::AccessLog access_log;      // opened before start(); then read-only
  ConnectionLimit connections;        // server.maxConnections
  ConnectionLimit admin_connections;  // server.adminMaxConnections
  BodyBudget body_budget;             // server.maxBufferedBodyBytes
  // server.tls: the context new TLS connections get (proxy/tls_context.h);
  // null without a TLS listener. Set before the listeners start.
  std::unique_ptr<TlsCredentials> tls;
  // Requests proxied right now (inference and pass-through), all threads.
  std::size_t in_flight() const;
};

// What the saturation detector reads of an endpoint: its scraped metrics,
// and `in_flight` as the caller counts it (sluice's requests on it).
flowcontrol::EndpointLoad endpoint_load(const datalayer::EndpointState& ep, int in_flight);

// A request policy for `c` whose prefix hashing follows `prep` (the
// scheduler's, built from the same config).
std::shared_ptr<RequestPolicy> make_request_policy(const config::Config& c,
                                                   const scheduling::RequestPreparation& prep);

}  // namespace sluice::proxy
