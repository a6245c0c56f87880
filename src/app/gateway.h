// The composition root: one sluice process. Builds the data plane's shared
// context, the I/O threads, the admin plane, the data layer (metrics
// scraper, endpoints file, DNS discovery) and the fleet, wires them to the
// dispatcher, and runs startup, reload and shutdown in their order. Only
// main.cc imports app/.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "admin/admin_server.h"
#include "admin/backend.h"
#include "app/jwks_source.h"
#include "app/key_writer.h"
#include "config/config.h"
#include "datalayer/dns_watcher.h"
#include "datalayer/endpoints_watcher.h"
#include "datalayer/metrics_scraper.h"
#include "fleet/fleet_sync.h"
#include "flowcontrol/controller_shell.h"
#include "proxy/data_plane.h"
#include "proxy/proxy_context.h"

namespace sluice::app {

class Gateway final : public admin::Backend {
 public:
  // `admin_token` empty: admin mutations need no token (loopback only).
  Gateway(const config::Config& config, std::string admin_token);
  ~Gateway() override;

  // The access log of config.server (before bind()); false with `error`.
  bool open_access_log(std::string& error);
  // Resolves the static endpoints, starts watching the endpoints file,
  // loads server.tls's files and binds the listeners (throws on failure, at
  // startup: config::ConfigError for a file that does not load). `listen`
  // "" binds no plain listener. Returns the bound "HOST:PORT" of the data
  // plane (plain; "" without), of its TLS listener ("" without) and of the
  // admin plane.
  struct Bound {
    std::string data, tls, admin;
  };
  Bound bind(const std::string& listen, const std::string& admin_listen);
  // Starts the dispatcher, the fleet, the data layer, the I/O threads and
  // the admin plane.
  void start();
  // Stops the admin plane and accepting; lets queued requests be
  // dispatched (server.shutdownQueueDeadline) and in-flight ones finish
  // (server.shutdownGracePeriod), then closes what is left. Blocks until
  // every thread has exited.
  void shutdown();

  // admin::Backend. reload(): re-reads the config file and applies what it
  // changed in place: bands, limits, policies, weights, TTL, objectives,
  // detector, scheduling profiles and plugins, endpoints. Queued and
  // in-flight requests stay. An invalid file changes nothing. `done` runs
  // exactly once, on the dispatcher thread (after the change applied) or
  // on the caller's. Any thread; reloads are serialized.
  proxy::ProxyContext& context() override { return ctx_; }
  fleet::FleetSync* fleet() override { return fleet_.get(); }
  void reload(std::function<void(admin::ReloadResult)> done) override;
  void collect_stats(std::function<void(observe::ThreadStats)> done) override;
  // The key changes run on key_writer_'s thread, `done` there too.
  std::vector<admin::KeyEntry> keys() override;
  std::optional<admin::KeyEntry> find_key(const std::string& id) override;
  std::vector<config::QuotaLimitSpec> tenant_quotas(const std::string& tenant) override;
  void put_key(const auth::KeyRecord& r, std::function<void(admin::KeyWriteResult)> done) override;
  void delete_key(const std::string& id,
                  std::function<void(bool, admin::KeyWriteResult)> done) override;

 private:
  // Startup (gateway.cc).
  void resolve_static_endpoints();
  void start_scraper();
  // What endpoint `slot`'s scrapes use: its address, and its TLS setting
  // and credential in data_policy_. Data-layer thread (or before it runs).
  datalayer::ScrapeTarget scrape_target(std::size_t slot) const;
  void start_fleet();
  void wait_for_queue(std::chrono::steady_clock::time_point deadline);
  // The endpoint pool (endpoints.cc), on the data-layer thread: the
  // config's endpoints plus the file's plus DNS's (new addresses join,
  // missing ones leave), published to the dispatcher.
  void apply_endpoints_file(const std::vector<config::EndpointConfig>& file);
  void reconcile_endpoints();
  void publish_endpoints();
  void start_dns();
  // Identity (identity.cc): the key file, and the authenticator each I/O
  // thread holds, built again when the keys or the config change.
  void start_identity();
  void start_jwks();
  void apply_key_file(
      const std::string& path, std::function<void()> done = [] {});
  void apply_key_text(
      const std::string& path, const std::string& text, std::function<void()> done = [] {});
  void reload_key_file(const std::string& path);
  // Counts a key file every I/O thread now holds (sluice_key_file_loads_total).
  std::function<void()> key_file_loaded();
  void set_identity_config(const config::Config& c);
  // `done` once every I/O thread has the new authenticator.
  void publish_authenticator(std::function<void()> done = [] {});
  // The key file's records (under identity_mu_), and its index by id.
  void set_file_keys(std::vector<auth::KeyRecord> records);
  // On key_writer_'s thread: a key change of the fleet's (held here) or
  // of the key file's; `done` once it applies, or with why not.
  void submit_key_change(std::function<void()> change,
                         const std::function<void(admin::KeyWriteResult)>& refused);
  void put_fleet_key(const auth::KeyRecord& r, std::function<void(admin::KeyWriteResult)> done);
  void put_file_key(const auth::KeyRecord& r, std::function<void(admin::KeyWriteResult)> done);
  void delete_file_key(const std::string& id,
                       std::function<void(bool, admin::KeyWriteResult)> done);
  // Without a fleet, the admin API's keys are written into the key file:
  // checked, rendered, read back, then written beside it and renamed over
  // it; a refused change leaves the file as it was. `done` once it applies.
  admin::KeyWriteResult write_key_file(std::vector<auth::KeyRecord> records,
                                       std::function<void()> done);
  // server.tls's files, looked at every reloadCheckInterval on the
  // data-layer thread (gateway.cc).
  void start_tls_watch();
  void arm_tls_watch();
  // Reload (reload.cc): its steps, in order.
  struct ReloadPlan;
  bool read_and_build(ReloadPlan& plan);
  void note_restart_needed(ReloadPlan& plan);
  void note_applied(ReloadPlan& plan);
  void apply(ReloadPlan& plan, std::function<void(admin::ReloadResult)> done);

  proxy::ProxyContext ctx_;
  proxy::DataPlane data_;
  // The dispatcher's queues of the threads that are not I/O threads;
  // declared before what uses them (destroyed after it).
  std::unique_ptr<flowcontrol::ControllerShell::Producer> reload_producer_;
  // Endpoint metrics for the dispatcher and the legacy detector.
  std::unique_ptr<flowcontrol::ControllerShell::Producer> scraper_producer_;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> data_producer_;   // pool changes
  std::unique_ptr<flowcontrol::ControllerShell::Producer> fleet_producer_;  // the sync thread's
  std::unique_ptr<datalayer::MetricsScraper> scraper_;
  std::unique_ptr<datalayer::FileWatcher> watcher_;
  std::unique_ptr<datalayer::FileWatcher> key_watcher_;  // auth.apiKeys.file
  std::unique_ptr<datalayer::DnsWatcher> dns_;
  std::optional<boost::asio::steady_timer> tls_watch_;  // on the scraper's context
  std::unique_ptr<fleet::FleetSync> fleet_;             // redis:; null without one
  std::unique_ptr<admin::AdminServer> admin_;
  std::vector<config::EndpointConfig> static_endpoints_;  // data-layer thread
  std::vector<config::EndpointConfig> file_endpoints_;    // data-layer thread
  std::vector<config::EndpointConfig> dns_endpoints_;     // data-layer thread
  // The request policy the data layer reaches endpoints with (upstream TLS,
  // credentials): the running one, installed on the data-layer thread.
  std::shared_ptr<const proxy::RequestPolicy> data_policy_;
  // Reloads: one at a time; the config that runs now.
  std::mutex reload_mu_;
  config::Config running_;
  std::shared_ptr<const proxy::RequestPolicy> running_policy_;
  std::string bound_;  // the data plane's bound address (the fleet shows it)
  // What the authenticator is built from; any thread, under identity_mu_.
  std::mutex identity_mu_;
  std::shared_ptr<const config::Config> identity_config_;
  struct KeyTables {
    std::vector<auth::KeyRecord> file;                      // auth.apiKeys.file's
    std::unordered_map<std::string, std::size_t> file_ids;  // id -> index in `file`
    std::map<std::string, auth::KeyRecord> admin;           // the admin API's, in a fleet
    auth::Digest written{};  // SHA-256 of the key file as this process last wrote it
  } keys_;
  std::unique_ptr<KeyWriter> key_writer_;    // the admin API's key changes, one at a time
  std::shared_ptr<const auth::Jwks> jwks_;   // auth.jwt's keys
  std::unique_ptr<JwksSource> jwks_source_;  // data-layer thread
  std::unique_ptr<datalayer::ModelCatalogPoller> catalog_;  // with auth:, data-layer thread
  bool started_ = false;
};

}  // namespace sluice::app
