// A reload (SIGHUP, or POST /admin/v1/reload), as four steps: read the file
// and build what it names; note what only a restart applies; note what
// applies in place; apply it, in order, on the threads that own each part.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "app/gateway.h"
#include "datalayer/upstream_tls.h"
#include "flowcontrol/from_config.h"
#include "flowcontrol/saturation_detectors.h"
#include "flowcontrol/usage_limit_policies.h"
#include "observe/log.h"
#include "proxy/quota_policy.h"
#include "proxy/tls_context.h"
#include "scheduling/from_config.h"

namespace sluice::app {

namespace net = boost::asio;

struct Gateway::ReloadPlan {
  admin::ReloadResult res;
  config::Config next;
  bool new_scheduling = false;
  std::shared_ptr<flowcontrol::ControllerReload> reload =
      std::make_shared<flowcontrol::ControllerReload>();
  // server.tls's files read again (with a TLS listener running).
  std::shared_ptr<proxy::TlsServerContext> tls;
  // TLS towards the model servers, its files read again.
  std::shared_ptr<const datalayer::UpstreamTlsSet> upstream_tls;
};

void Gateway::reload(std::function<void(admin::ReloadResult)> done) {
  std::lock_guard lock(reload_mu_);
  ReloadPlan plan;
  if (!read_and_build(plan)) {
    SLUICE_LOG(kWarn, "reload",
               "config " << running_.source
                         << " not applied; the running config stays: " << plan.res.error);
    return done(std::move(plan.res));
  }
  note_restart_needed(plan);
  note_applied(plan);
  apply(plan, std::move(done));
}

// Reads the file and builds what it names before anything changes: a file
// that does not load, or a plugin that cannot be built, fails the reload
// here and the running config stays.
bool Gateway::read_and_build(ReloadPlan& plan) {
  auto& res = plan.res;
  try {
    plan.next = config::load_config_file(running_.source);
  } catch (const config::ConfigError& e) {
    res.error = e.what();
  } catch (const std::exception& e) {
    res.error = std::string("cannot read ") + running_.source + ": " + e.what();
  }
  if (!res.error.empty()) return false;
  plan.new_scheduling = plan.next.scheduling_fingerprint != running_.scheduling_fingerprint;
  try {
    if (plan.new_scheduling) plan.reload->scheduler = scheduling::build_scheduler(plan.next);
    plan.reload->detector = flowcontrol::make_detector(plan.next.saturation_detector);
    plan.reload->usage_limit =
        flowcontrol::make_usage_limit_policy(plan.next.flow_control.usage_limit);
    plan.reload->admitters = flowcontrol::make_admitters(plan.next);
  } catch (const config::ConfigError& e) {
    res.error = e.what();
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  if (!res.error.empty()) return false;
  // The model servers' TLS settings and files, read again.
  plan.upstream_tls = datalayer::build_upstream_tls(plan.next, res.error);
  if (!plan.upstream_tls) return false;
  // A reload re-reads the certificate files too: a set that does not load
  // fails the reload, and the running certificate keeps serving.
  if (ctx_.tls && plan.next.server.tls.enabled()) {
    plan.tls = proxy::build_tls_context(plan.next.server.tls, res.error);
    if (!plan.tls) ctx_.tls->note_failure();
  }
  return res.error.empty();
}

// What only a restart changes, against what runs (the startup config, with
// the command line's --listen, --admin-listen, --threads and access-log
// options standing for the file's). The log level applies in place; the
// rest of server: needs a restart.
void Gateway::note_restart_needed(ReloadPlan& plan) {
  const auto& next = plan.next;
  auto& res = plan.res;
  if (next.server.log_level != running_.server.log_level) {
    log::Level level;
    if (log::parse_level(next.server.log_level, level)) log::set_level(level);
    res.applied.push_back("server.logLevel");
  }
  {
    const auto& live = ctx_.config.server;
    auto compare = next.server;
    compare.listen = live.listen;
    compare.admin_listen = live.admin_listen;
    compare.threads = live.threads;
    compare.access_log = live.access_log;
    compare.access_log_format = live.access_log_format;
    compare.log_level = live.log_level;
    // server.tls applies in place (a new context), but for its listener
    // and its check interval.
    compare.tls = live.tls;
    // The model servers' credential applies in place (the request policy).
    compare.upstream_credential_file = live.upstream_credential_file;
    compare.upstream_credential = live.upstream_credential;
    compare.upstream_tls = live.upstream_tls;  // new connections get the new one
    if (!(compare == live)) res.restart_needed.push_back("server");
    if (next.server.tls.listen != live.tls.listen)
      res.restart_needed.push_back("server.tls.listen");
    else if (next.server.tls.reload_check_interval != live.tls.reload_check_interval)
      res.restart_needed.push_back("server.tls.reloadCheckInterval");
  }
  if (next.flow_control.enabled != ctx_.gated)
    res.restart_needed.push_back("featureGates.flowControl");
  if (!(next.redis == ctx_.config.redis)) res.restart_needed.push_back("redis");
  if (next.auth.api_keys != ctx_.config.auth.api_keys)
    res.restart_needed.push_back("auth.apiKeys (the key file watched)");
  if (next.dns_endpoints != ctx_.config.dns_endpoints)
    res.restart_needed.push_back("endpoints (dns entries)");
  for (const auto& e : next.endpoints) {
    const int slot = ctx_.endpoints.find(e.address);
    if (slot < 0) continue;
    const auto& live = ctx_.endpoints.at(static_cast<std::size_t>(slot)).config;
    if (e.labels != live.labels || e.engine != live.engine)
      res.restart_needed.push_back("endpoints." + e.address + " (labels, engine)");
  }
  std::string metrics_path = "/metrics";
  for (const auto& p : next.plugins) {
    if (p.type != "metrics-data-source" || !p.parameters || !p.parameters.IsMap()) continue;
    if (auto path = p.parameters["path"]; path && path.IsScalar() && !path.Scalar().empty())
      metrics_path = path.Scalar();
  }
  if (metrics_path != ctx_.metrics_path) res.restart_needed.push_back("metrics-data-source.path");
}

// What applies in place.
void Gateway::note_applied(ReloadPlan& plan) {
  const auto& next = plan.next;
  auto& applied = plan.res.applied;
  if (!(next.flow_control == running_.flow_control)) applied.push_back("flowControl");
  if (!(next.flows == running_.flows)) applied.push_back("flows");
  if (!(next.objectives == running_.objectives)) applied.push_back("objectives");
  if (!(next.saturation_detector == running_.saturation_detector))
    applied.push_back("saturationDetector");
  if (plan.new_scheduling) applied.push_back("plugins/schedulingProfiles");
  if (!(next.endpoints == running_.endpoints)) applied.push_back("endpoints");
  if (!(next.tenants == running_.tenants)) applied.push_back("tenants");
  if (!(next.auth == running_.auth)) applied.push_back("auth");
  if (!(next.quota == running_.quota)) applied.push_back("quota");
  if (plan.tls) applied.push_back("server.tls (files read again)");
  // Their files were read again by the load: new requests carry what they
  // hold now (nothing of it in the result).
  if (!next.server.upstream_credential_file.empty() ||
      std::any_of(next.endpoints.begin(), next.endpoints.end(),
                  [](const auto& e) { return !e.credential_file.empty(); }))
    applied.push_back("upstream credentials (files read again)");
  if (next.server.upstream_tls.enabled ||
      !(next.server.upstream_tls == running_.server.upstream_tls))
    applied.push_back("server.upstreamTls (files read again)");
}

// In order, each step after the one before: the pool (data-layer thread,
// which publishes it to the dispatcher), then the controller (dispatcher,
// ordered after that publication by the same producer), then each I/O
// thread's request policy; `done` once the last thread has it.
void Gateway::apply(ReloadPlan& plan, std::function<void(admin::ReloadResult)> done) {
  const auto& next = plan.next;
  auto reload = plan.reload;
  // The gate does not change without a restart: not gated, the controller
  // stays a pass-through (no limits, no TTL).
  reload->config = ctx_.gated ? flowcontrol::controller_config(next)
                              : flowcontrol::ungated_controller_config(next);
  for (const auto& f : next.flows) reload->weights[f.id] = f.weight;
  reload->staleness = next.saturation_detector.metrics_staleness_threshold;
  auto gated_config = next;
  gated_config.flow_control.enabled = ctx_.gated;
  auto fresh =
      proxy::make_request_policy(gated_config, reload->scheduler ? reload->scheduler->preparation()
                                                                 : running_policy_->preparation);
  fresh->upstream_tls = plan.upstream_tls;
  std::shared_ptr<const proxy::RequestPolicy> policy = std::move(fresh);
  // The books first: an I/O thread with the new policy finds its limits.
  if (const std::size_t failed = ctx_.quotas.configure(policy->quotas))
    SLUICE_LOG(kError, "quota", failed << " tenant(s) with more limits than an owner may have");
  running_policy_ = policy;
  running_ = next;
  set_identity_config(next);
  // New TLS connections get the new context from here; those in progress
  // keep theirs.
  if (plan.tls) {
    ctx_.tls->install(plan.tls, next.server.tls);
    SLUICE_LOG(kInfo, "reload", "tls: new connections get " << proxy::describe(*plan.tls));
  }
  auto& res = plan.res;
  SLUICE_LOG(kInfo, "reload",
             "config " << running_.source << " applying: " << res.applied.size()
                       << " section(s) changed"
                       << (res.restart_needed.empty() ? "" : "; some changes need a restart"));
  for (const auto& r : res.restart_needed)
    SLUICE_LOG(kWarn, "reload", r << " changed; it applies only after a restart");

  auto endpoints = next.endpoints;
  net::post(scraper_->context(), [this, endpoints = std::move(endpoints), reload, policy,
                                  res = std::move(res), done = std::move(done)]() mutable {
    // Scrapes and catalogue polls reach the endpoints with the new TLS
    // settings and credentials from here (a scrape whose setting changed
    // connects again).
    data_policy_ = policy;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i)
      if (!ctx_.endpoints.at(i).removed.load()) scraper_->update(i, scrape_target(i));
    if (catalog_) catalog_->set_upstream(policy->upstream_tls, policy->credentials);
    static_endpoints_ = std::move(endpoints);
    reconcile_endpoints();
    ctx_.flow_control->reconfigure(
        *data_producer_,
        [reload](flowcontrol::Controller& c) {
          c.apply(std::move(*reload), flowcontrol::Clock::now());
        },
        [this, policy, res = std::move(res), done = std::move(done)]() mutable {
          auto shared_res = std::make_shared<admin::ReloadResult>(std::move(res));
          shared_res->ok = true;
          data_.set_policy(policy, [shared_res, done = std::move(done)]() mutable {
            done(std::move(*shared_res));
          });
        });
  });
}

}  // namespace sluice::app
