#include "app/gateway.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include "config/units.h"
#include "datalayer/upstream_tls.h"
#include "observe/log.h"
#include "proxy/tls_context.h"
#include "scheduling/plugins/topology.h"

namespace sluice::app {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Gateway::Gateway(const config::Config& config, std::string admin_token)
    : ctx_(config), data_(ctx_), running_(config) {
  reload_producer_ = ctx_.flow_control->make_producer();
  running_policy_ = ctx_.policy;
  admin_ = std::make_unique<admin::AdminServer>(*this, std::move(admin_token));
}

Gateway::~Gateway() { shutdown(); }

bool Gateway::open_access_log(std::string& error) {
  return ctx_.access_log.open(ctx_.config.server.access_log, ctx_.config.server.access_log_format,
                              error);
}

Gateway::Bound Gateway::bind(const std::string& listen, const std::string& admin_listen) {
  resolve_static_endpoints();
  if (auto w = scheduling::topology_warning(ctx_.config); !w.empty())
    SLUICE_LOG(kWarn, "scheduling", w);
  start_scraper();
  static_endpoints_ = ctx_.config.endpoints;
  if (!ctx_.config.server.endpoints_file.empty()) {
    watcher_ = std::make_unique<datalayer::FileWatcher>(
        scraper_->context(), ctx_.config.server.endpoints_file,
        ctx_.config.server.endpoints_file_poll_interval, "endpoints",
        [this](const std::string& path) {
          apply_endpoints_file(config::load_endpoints_file(path));
        },
        [](const std::string& message) { SLUICE_LOG(kWarn, "endpoints", message); });
    watcher_->load_now();  // throws ConfigError: startup fails
  }
  start_identity();
  Bound bound;
  const auto& tls = ctx_.config.server.tls;
  if (tls.enabled()) {
    ctx_.tls = std::make_unique<proxy::TlsCredentials>(tls);  // throws ConfigError
    SLUICE_LOG(kInfo, "tls", "loaded " << proxy::describe(*ctx_.tls->current()));
  }
  if (!listen.empty()) bound.data = data_.bind(listen);
  if (tls.enabled()) bound.tls = data_.bind_tls(tls.listen);
  bound_ = !bound.data.empty() ? bound.data : bound.tls;
  bound.admin = admin_->bind(admin_listen);
  return bound;
}

void Gateway::resolve_static_endpoints() {
  // Resolve the static endpoints once, at startup; one that does not
  // resolve stops it, naming its entry.
  net::io_context resolver_context(1);
  tcp::resolver resolver(resolver_context);
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
    auto& ep = ctx_.endpoints.at(i);
    boost::system::error_code ec;
    auto results = resolver.resolve(ep.config.host, std::to_string(ep.config.port), ec);
    if (ec || results.empty())
      throw std::runtime_error(ctx_.config.source + ":" + std::to_string(ep.config.line) +
                               ": endpoints[" + std::to_string(i) + "].address: cannot resolve '" +
                               ep.config.host + "' (" + (ec ? ec.message() : "no address") + ")");
    ep.resolved = results.begin()->endpoint();
  }
}

// Endpoint metrics: into the endpoint state (legacy admission reads them
// there) and to the dispatcher (scheduler, saturation).
void Gateway::start_scraper() {
  data_policy_ = ctx_.policy;
  std::vector<datalayer::ScrapeTarget> targets;
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) targets.push_back(scrape_target(i));
  scraper_producer_ = ctx_.flow_control->make_producer();
  data_producer_ = ctx_.flow_control->make_producer();
  datalayer::ScraperOptions so;
  so.interval = ctx_.config.server.metrics_refresh_interval;
  so.timeout = ctx_.config.server.metrics_timeout;
  scraper_ = std::make_unique<datalayer::MetricsScraper>(
      std::move(targets), so, [this](std::size_t endpoint, const datalayer::EngineMetrics& m) {
        ctx_.endpoints.at(endpoint).store_metrics(m.waiting, m.running, m.kv_cache_usage,
                                                  datalayer::Clock::now());
        flowcontrol::EndpointMetrics em;
        em.waiting_queue_size = m.waiting;
        em.running_requests_size = m.running;
        em.kv_cache_usage = m.kv_cache_usage;
        em.active_models = m.active_models;
        em.waiting_models = m.waiting_models;
        em.max_active_models = m.max_lora;  // the engine's name for it
        em.cache_block_size = m.cache_block_size;
        em.cache_num_gpu_blocks = m.cache_num_gpu_blocks;
        auto* shell = ctx_.flow_control.get();
        shell->update_metrics(*scraper_producer_, endpoint, em);
        shell->wake();
      });
  ctx_.scraper = scraper_.get();
}

datalayer::ScrapeTarget Gateway::scrape_target(std::size_t slot) const {
  const auto& ep = ctx_.endpoints.at(slot);
  datalayer::ScrapeTarget t;
  t.address = ep.resolved;
  t.host_port = ep.config.address;
  t.host = ep.config.host;
  t.engine = ep.config.engine;
  t.path = ctx_.metrics_path;
  if (data_policy_->upstream_tls) t.tls = data_policy_->upstream_tls->for_address(t.host_port);
  if (data_policy_->credentials)
    t.authorization = data_policy_->credentials->for_address(t.host_port);
  return t;
}

void Gateway::start() {
  data_.start_dispatcher();
  start_fleet();
  scraper_->start();
  if (watcher_) net::post(scraper_->context(), [this] { watcher_->start(); });
  if (key_watcher_) net::post(scraper_->context(), [this] { key_watcher_->start(); });
  if (catalog_) net::post(scraper_->context(), [this] { catalog_->start(); });
  start_dns();
  start_tls_watch();
  data_.start();
  admin_->start();
  started_ = true;
}

void Gateway::shutdown() {
  if (!started_) return;
  started_ = false;
  admin_->stop();
  const auto start = std::chrono::steady_clock::now();
  const auto grace = ctx_.config.server.shutdown_grace_period;
  const auto queue_deadline = std::min(ctx_.config.server.shutdown_queue_deadline, grace);
  SLUICE_LOG(kInfo, "server",
             "shutting down: no longer accepting; queued requests have "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(queue_deadline).count()
                 << " ms to be dispatched, in-flight ones "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(grace).count()
                 << " ms to finish");
  ctx_.shutting_down.store(true);
  ctx_.draining.store(true);
  data_.stop_accepting();
  wait_for_queue(start + queue_deadline);
  // What is still queued ends now (EvictedOther, 503); their connections answer
  // on their own threads, which still run.
  if (watcher_) net::post(scraper_->context(), [this] { watcher_->stop(); });
  if (key_watcher_) net::post(scraper_->context(), [this] { key_watcher_->stop(); });
  if (jwks_source_) net::post(scraper_->context(), [this] { jwks_source_->stop(); });
  if (catalog_) net::post(scraper_->context(), [this] { catalog_->stop(); });
  if (tls_watch_) net::post(scraper_->context(), [this] { tls_watch_->cancel(); });
  if (dns_) dns_->stop();
  if (scraper_) scraper_->stop();
  // After the key file's watcher (on the scraper's thread) is gone: what
  // waits is made, and answered to no one (the admin plane stopped).
  key_writer_.reset();
  // Leave the fleet before the dispatcher stops (the sync thread's last
  // exchange needs it): the others stop counting this replica's work.
  if (fleet_) fleet_->stop();
  ctx_.flow_control->stop();
  data_.finish(start + grace);
  ctx_.access_log.flush();  // every request's line is out before "stopped"
  SLUICE_LOG(kInfo, "server", "stopped");
}

// Queued requests keep being dispatched (metrics still scraped) until the
// queue is empty or `deadline` passes; a shutdown poll, not a hot path.
void Gateway::wait_for_queue(std::chrono::steady_clock::time_point deadline) {
  while (ctx_.flow_control->queued() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::size_t left = ctx_.flow_control->queued();
  if (left > 0)
    SLUICE_LOG(kWarn, "server",
               left << " queued request(s) not dispatched by the deadline end as evicted-other");
}

void Gateway::start_tls_watch() {
  if (!ctx_.tls) return;
  tls_watch_.emplace(scraper_->context());
  arm_tls_watch();
}

// A certificate renewed on disk is served to new connections within an
// interval; one that does not load (written before its key, say) is
// logged once and tried again at the next change.
void Gateway::arm_tls_watch() {
  tls_watch_->expires_after(ctx_.config.server.tls.reload_check_interval);
  tls_watch_->async_wait([this](boost::system::error_code ec) {
    if (ec || ctx_.shutting_down.load()) return;
    std::string message;
    switch (ctx_.tls->check_files(message)) {
      case proxy::TlsCredentials::Check::kReloaded:
        SLUICE_LOG(kInfo, "tls", "files changed; new connections get " << message);
        break;
      case proxy::TlsCredentials::Check::kFailed:
        SLUICE_LOG(kWarn, "tls",
                   "files changed but do not load; the running certificate stays: " << message);
        break;
      case proxy::TlsCredentials::Check::kUnchanged:
        break;
    }
    arm_tls_watch();
  });
}

void Gateway::collect_stats(std::function<void(observe::ThreadStats)> done) {
  data_.collect_stats(std::move(done));
}

namespace {

// Quotas' leases (issue 41): every busy limit each lease round, at most
// ten a second (a script per limit; a lease covers twice a round's demand).
fleet::QuotaLeaseOptions quota_lease_options(const config::Config& c,
                                             std::chrono::milliseconds interval) {
  fleet::QuotaLeaseOptions q;
  q.interval = std::max<std::chrono::milliseconds>(
      interval, std::chrono::milliseconds(quota::kLeaseIntervalMs));
  switch (c.quota.fail_mode) {
    case config::QuotaFailMode::kOpen:
      q.fail_mode = fleet::QuotaFailMode::kOpen;
      break;
    case config::QuotaFailMode::kClosed:
      q.fail_mode = fleet::QuotaFailMode::kClosed;
      break;
    case config::QuotaFailMode::kLocal:
      q.fail_mode = fleet::QuotaFailMode::kLocal;
      break;
  }
  return q;
}

}  // namespace

void Gateway::start_fleet() {
  const auto& r = ctx_.config.redis;
  if (!r.enabled) return;
  fleet::FleetOptions o;
  o.redis.host = r.host;
  o.redis.port = r.port;
  o.redis.unix_socket = r.unix_socket;
  o.redis.user = r.user;
  o.redis.password = r.password;
  o.redis.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(r.timeout);
  o.prefix = r.key_prefix;
  o.replica_id = r.replica_id;
  if (o.replica_id.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
      std::snprintf(host, sizeof host, "sluice");
    o.replica_id = std::string(host) + "-" + std::to_string(::getpid());
  }
  o.advertise = bound_;
  o.interval = std::chrono::duration_cast<std::chrono::milliseconds>(r.sync_interval);
  o.lease = std::chrono::duration_cast<std::chrono::milliseconds>(r.lease);
  o.max_replicas = r.max_replicas;
  o.max_flows = static_cast<std::size_t>(ctx_.config.flow_control.max_flows);
  fleet_producer_ = ctx_.flow_control->make_producer();
  // One exchange per sync on the dispatcher thread; the sync thread waits
  // for it (bounded), the dispatcher never waits for the sync thread.
  struct Round {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    flowcontrol::FleetInbound in;
    flowcontrol::FleetOutbound out;
  };
  auto exchange = [this](const flowcontrol::FleetInbound& in, flowcontrol::FleetOutbound& out) {
    auto round = std::make_shared<Round>();
    round->in = in;
    ctx_.flow_control->reconfigure(
        *fleet_producer_,
        [round](flowcontrol::Controller& c) {
          c.exchange_fleet(round->in, round->out, flowcontrol::Clock::now());
        },
        [round] {
          std::lock_guard lock(round->mu);
          round->done = true;
          round->cv.notify_all();
        });
    std::unique_lock lock(round->mu);
    if (!round->cv.wait_for(lock, std::chrono::seconds(1), [&] { return round->done; }))
      return false;
    out = std::move(round->out);
    return true;
  };
  auto logger = [](bool warning, const std::string& message) {
    if (warning) {
      SLUICE_LOG(kWarn, "fleet", message);
    } else {
      SLUICE_LOG(kInfo, "fleet", message);
    }
  };
  const auto interval = o.interval;
  fleet_ = std::make_unique<fleet::FleetSync>(std::move(o), exchange, logger);
  fleet_->set_quota_ledger(ctx_.quotas.ledger(), quota_lease_options(ctx_.config, interval));
  fleet_->start();
}

}  // namespace sluice::app
