#include "proxy/server.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <cstdio>
#include <random>

#include "config/units.h"
#include "flowcontrol/from_config.h"
#include "flowcontrol/saturation_detectors.h"
#include "flowcontrol/usage_limit_policies.h"
#include "observe/log.h"
#include "proxy/http_session.h"
#include "proxy/reactor_hint.h"
#include "scheduling/from_config.h"

namespace sluice::proxy {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::shared_ptr<RequestPolicy> make_policy(const config::Config& c,
                                           const scheduling::RequestPreparation& prep) {
  auto p = std::make_shared<RequestPolicy>(c);
  p->preparation = prep;
  return p;
}

}  // namespace

RequestPolicy::RequestPolicy(const config::Config& c) {
  for (const auto& o : c.objectives) objectives[o.name] = ObjectiveInfo{o.priority, o.ttl};
  if (!c.flow_control.enabled) legacy_detector = flowcontrol::make_detector(c.saturation_detector);
  if (c.flow_control.enabled) room_detector = flowcontrol::make_detector(c.saturation_detector);
}

ProxyContext::ProxyContext(const config::Config& c)
    : config(c),
      endpoints(c.endpoints),
      connections(c.server.max_connections),
      admin_connections(c.server.admin_max_connections),
      body_budget(c.server.max_buffered_body_bytes > 0
                      ? c.server.max_buffered_body_bytes
                      : default_body_budget(c.server.max_body_bytes)) {
  auto controller = flowcontrol::make_controller(c);
  controller->set_metrics_max_flows(c.server.metrics_max_flows);
  policy = make_policy(c, controller->scheduler()->preparation());
  gated = c.flow_control.enabled;
  flow_control = std::make_unique<flowcontrol::ControllerShell>(std::move(controller));
  for (const auto& p : c.plugins) {
    if (p.type != "metrics-data-source" || !p.parameters || !p.parameters.IsMap()) continue;
    if (auto path = p.parameters["path"]; path && path.IsScalar() && !path.Scalar().empty())
      metrics_path = path.Scalar();
  }
}

bool ProxyContext::pool_saturated(const flowcontrol::SaturationDetector& detector) const {
  const auto now = datalayer::Clock::now();
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const auto& ep = endpoints.at(i);
    flowcontrol::EndpointLoad load;
    const auto at = ep.metrics_ns.load(std::memory_order_acquire);
    load.has_metrics = at != 0;
    load.metrics_time = flowcontrol::TimePoint(flowcontrol::Duration(at));
    load.waiting = ep.waiting.load(std::memory_order_relaxed);
    load.running = ep.running.load(std::memory_order_relaxed);
    load.kv_cache_usage = ep.kv_cache_usage.load(std::memory_order_relaxed);
    load.in_flight =
        static_cast<std::uint32_t>(std::max(0, ep.in_flight.load(std::memory_order_relaxed)));
    if (ep.usable(now) && detector.has_room(load, now)) return false;
  }
  return true;
}

std::size_t ProxyContext::in_flight() const {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < endpoints.size(); ++i)
    n += endpoints.at(i).in_flight.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void Worker::wake_dispatcher() {
  // Inline, the shell's own wake is already one post per pass.
  if (shell->is_inline()) return shell->wake();
  if (wake_scheduled_) return;
  wake_scheduled_ = true;
  net::post(ioc, [this] {
    wake_scheduled_ = false;
    shell->wake();
  });
}

void Worker::defer_watch(HttpSession& session) {
  deferred_watches.enroll(session);
  if (!watch_tick_pending_) start_watch_tick();
}

void Worker::start_watch_tick() {
  if (!watch_tick) watch_tick.emplace(ioc);
  watch_tick_pending_ = true;
  watch_tick->expires_after(kWatchTick);
  watch_tick->async_wait([this](boost::system::error_code ec) {
    watch_tick_pending_ = false;
    if (ec) return;
    deferred_watches.advance(
        [](DeferredWatches::Hook& h) { static_cast<HttpSession&>(h).arm_deferred_watch(); });
    if (!deferred_watches.empty()) start_watch_tick();
  });
}

void Worker::hint_read(UpstreamConnection& conn) {
  if (!reactor_hint_supported() || !arm_close_watch()) return;
  if (hinted_reads.hint(conn, conn.stream.socket().native_handle()))
    skip_next_speculative_read(conn.stream.socket());
}

namespace {
void rearm(HintedReads::Hook& h) {
  rearm_read_readiness(static_cast<UpstreamConnection&>(h).stream.socket());
}
}  // namespace

bool Worker::arm_close_watch() {
  if (close_watch_armed_) return true;
  if (hinted_reads.stopped() || hinted_reads.fd() < 0) return false;
  if (!close_watch) {
    const int fd = ::fcntl(hinted_reads.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return false;  // (descriptors exhausted: no hint this time)
    boost::system::error_code ec;
    close_watch.emplace(ioc);
    close_watch->assign(fd, ec);
    if (ec) {
      ::close(fd);
      close_watch.reset();
      return false;
    }
  }
  close_watch_armed_ = true;
  close_watch->async_wait(
      net::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
        close_watch_armed_ = false;
        if (ec) {
          // Closed at shutdown; anything else would leave
          // hinted reads unwatched: no more hints.
          if (ec != net::error::operation_aborted)
            SLUICE_LOG(kWarn, "server", "upstream close watch failed: " << ec.message());
          hinted_reads.stop(rearm);
          return;
        }
        hinted_reads.drain(rearm);
        arm_close_watch();
      });
  return true;
}

void Worker::stop_hinting() {
  hinted_reads.stop(rearm);
  if (close_watch) close_watch->close();
}

void Worker::request_admitted() {
  if (inline_host_ && !in_inline_pass_ && !draining_ && ++admitted_since_pass_ >= kEarlyPassAfter)
    return shell->pass();
  wake_dispatcher();
}

void Worker::deliver(std::shared_ptr<HttpSession> session, const flowcontrol::Decision& d) {
  inbox_.enqueue(Delivery{std::move(session), d});
  // During this thread's inline pass, end_inline_pass() drains (the flag
  // is this thread's: read only when running on it).
  if (ioc.get_executor().running_in_this_thread() && in_inline_pass_) return;
  if (!drain_pending_.exchange(true, std::memory_order_acq_rel))
    net::post(ioc, [this] { drain_inbox(); });
}

void Worker::drain_inbox() {
  // Reset first: a delivery racing with this drain either lands in this
  // loop or posts another drain (harmless when empty).
  drain_pending_.store(false, std::memory_order_release);
  const bool outer = !std::exchange(draining_, true);
  Delivery d;
  while (inbox_.try_dequeue(d)) {
    d.session->on_decision(d.decision);
    d.session.reset();
  }
  if (outer) draining_ = false;
}

Server::Server(const config::Config& config) : ctx_(config), running_(config) {
  reload_producer_ = ctx_.flow_control->make_producer();
  running_policy_ = ctx_.policy;
  std::size_t n = config.server.threads > 0 ? static_cast<std::size_t>(config.server.threads)
                                            : std::max(1u, std::thread::hardware_concurrency());
  std::random_device rd;
  for (std::size_t i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<Worker>(i, ctx_));
    workers_.back()->id_prefix = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
}

Server::~Server() {
  if (!threads_.empty()) shutdown();
}

std::string Server::bind(const std::string& listen) {
  // Resolve the static endpoints once, at startup; one that does not
  // resolve stops it, naming its entry.
  tcp::resolver resolver(workers_[0]->ioc);
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
  // Endpoint metrics: into the endpoint state (legacy admission reads them
  // there) and to the dispatcher (scheduler, saturation).
  std::vector<datalayer::ScrapeTarget> targets;
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
    const auto& ep = ctx_.endpoints.at(i);
    targets.push_back({ep.resolved, ep.config.address, ep.config.engine, ctx_.metrics_path});
  }
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
  static_endpoints_ = ctx_.config.endpoints;
  if (!ctx_.config.server.endpoints_file.empty()) {
    watcher_ = std::make_unique<datalayer::EndpointsWatcher>(
        scraper_->context(), ctx_.config.server.endpoints_file,
        ctx_.config.server.endpoints_file_poll_interval,
        [this](std::vector<config::EndpointConfig> file) { apply_endpoints_file(file); },
        [](const std::string& message) { SLUICE_LOG(kWarn, "endpoints", message); });
    apply_endpoints_file(watcher_->load_now());  // throws ConfigError: startup fails
  }
  auto hp = config::parse_host_port(listen);
  if (!hp) throw std::runtime_error("invalid listen address '" + listen + "'");
  auto addr = resolver.resolve(std::string(hp->host), std::to_string(hp->port)).begin()->endpoint();
  acceptor_.emplace(workers_[0]->ioc);
  acceptor_->open(addr.protocol());
  acceptor_->set_option(net::socket_base::reuse_address(true));
  acceptor_->bind(addr);
  acceptor_->listen(net::socket_base::max_listen_connections);
  auto bound = acceptor_->local_endpoint();
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  bound_ = host + ":" + std::to_string(bound.port());
  return bound_;
}

void Server::apply_endpoints_file(const std::vector<config::EndpointConfig>& file) {
  file_endpoints_ = file;
  reconcile_endpoints();
}

void Server::reconcile_endpoints() {
  // Wanted: the config's endpoints, then the file's (first one wins).
  auto wanted = [this] {
    std::vector<const config::EndpointConfig*> out;
    std::set<std::string> addresses;
    for (const auto* list : {&static_endpoints_, &file_endpoints_, &dns_endpoints_})
      for (const auto& c : *list)
        if (addresses.insert(c.address).second) out.push_back(&c);
    return out;
  };
  auto in_pool = [this](const std::string& address) {
    const int slot = ctx_.endpoints.find(address);
    return slot >= 0 && !ctx_.endpoints.at(static_cast<std::size_t>(slot)).removed.load();
  };
  std::vector<config::EndpointConfig> missing;
  for (const auto* c : wanted())
    if (!in_pool(c->address)) missing.push_back(*c);
  // Host names are looked up off this thread, so the scrapes go on; the pool
  // changes once all lookups are done (no IP literal waits: then at once),
  // against what is wanted by then: a change that came in meanwhile is not
  // undone by this one (its own lookups add what it added).
  datalayer::resolve_endpoints(
      scraper_->context(), std::move(missing), datalayer::kResolveTimeout,
      [this, wanted, in_pool](std::vector<datalayer::Resolution> resolved) {
        // Once shutting down, the scraper may have stopped its targets: one
        // added now would keep its thread from ending.
        if (ctx_.shutting_down.load()) return;
        std::map<std::string, const datalayer::Resolution*> by_address;
        for (const auto& r : resolved) by_address[r.config.address] = &r;
        std::set<std::string> addresses;
        for (const auto* c : wanted()) {
          addresses.insert(c->address);
          const auto it = by_address.find(c->address);
          if (it == by_address.end() || in_pool(c->address)) continue;
          const auto& r = *it->second;
          if (!r.endpoint) {
            // Not added; the next change of the file or config tries again.
            SLUICE_LOG(kWarn, "endpoints",
                       "cannot resolve " << c->address << " (" << r.error << "); not added");
            continue;
          }
          const int slot = ctx_.endpoints.add(*c, *r.endpoint);
          if (slot < 0) {
            SLUICE_LOG(kWarn, "endpoints", "pool full; " << c->address << " not added");
            continue;
          }
          const auto& ep = ctx_.endpoints.at(static_cast<std::size_t>(slot));
          scraper_->add(static_cast<std::size_t>(slot),
                        {ep.resolved, ep.config.address, ep.config.engine, ctx_.metrics_path});
          SLUICE_LOG(kInfo, "endpoints", "added " << c->address << " (slot " << slot << ")");
        }
        for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
          auto& ep = ctx_.endpoints.at(i);
          if (ep.removed.load() || addresses.count(ep.config.address)) continue;
          ctx_.endpoints.remove(i);
          scraper_->remove(i);
          SLUICE_LOG(kInfo, "endpoints",
                     "removed " << ep.config.address << "; requests in flight on it finish");
        }
        publish_endpoints();
      });
}

void Server::reload(std::function<void(ReloadResult)> done) {
  std::lock_guard lock(reload_mu_);
  ReloadResult res;
  config::Config next;
  try {
    next = config::load_config_file(running_.source);
    // Built before anything changes: a plugin that cannot be built fails
    // the reload here, and the running config stays.
  } catch (const config::ConfigError& e) {
    res.error = e.what();
  } catch (const std::exception& e) {
    res.error = std::string("cannot read ") + running_.source + ": " + e.what();
  }
  const bool new_scheduling =
      res.error.empty() && next.scheduling_fingerprint != running_.scheduling_fingerprint;
  auto reload = std::make_shared<flowcontrol::ControllerReload>();
  if (res.error.empty()) {
    try {
      if (new_scheduling) reload->scheduler = scheduling::build_scheduler(next);
      reload->detector = flowcontrol::make_detector(next.saturation_detector);
      reload->usage_limit = flowcontrol::make_usage_limit_policy(next.flow_control.usage_limit);
    } catch (const config::ConfigError& e) {
      res.error = e.what();
    } catch (const std::exception& e) {
      res.error = e.what();
    }
  }
  if (!res.error.empty()) {
    SLUICE_LOG(
        kWarn, "reload",
        "config " << running_.source << " not applied; the running config stays: " << res.error);
    return done(std::move(res));
  }

  // What only a restart changes, against what runs (the startup config,
  // with the command line's --listen, --admin-listen, --threads and
  // access-log options standing for the file's).
  // The log level applies in place; the rest of server: needs a restart.
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
    if (!(compare == live)) res.restart_needed.push_back("server");
  }
  if (next.flow_control.enabled != ctx_.gated)
    res.restart_needed.push_back("featureGates.flowControl");
  if (!(next.redis == ctx_.config.redis)) res.restart_needed.push_back("redis");
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

  // What applies in place.
  if (!(next.flow_control == running_.flow_control)) res.applied.push_back("flowControl");
  if (!(next.flows == running_.flows)) res.applied.push_back("flows");
  if (!(next.objectives == running_.objectives)) res.applied.push_back("objectives");
  if (!(next.saturation_detector == running_.saturation_detector))
    res.applied.push_back("saturationDetector");
  if (new_scheduling) res.applied.push_back("plugins/schedulingProfiles");
  if (!(next.endpoints == running_.endpoints)) res.applied.push_back("endpoints");

  // The gate does not change without a restart: not gated, the controller
  // stays a pass-through (no limits, no TTL).
  reload->config = ctx_.gated ? flowcontrol::controller_config(next)
                              : flowcontrol::ungated_controller_config(next);
  for (const auto& f : next.flows) reload->weights[f.id] = f.weight;
  reload->staleness = next.saturation_detector.metrics_staleness_threshold;
  auto gated_config = next;
  gated_config.flow_control.enabled = ctx_.gated;
  std::shared_ptr<const RequestPolicy> policy =
      make_policy(gated_config, reload->scheduler ? reload->scheduler->preparation()
                                                  : running_policy_->preparation);
  running_policy_ = policy;
  running_ = next;
  SLUICE_LOG(kInfo, "reload",
             "config " << running_.source << " applying: " << res.applied.size()
                       << " section(s) changed"
                       << (res.restart_needed.empty() ? "" : "; some changes need a restart"));
  for (const auto& r : res.restart_needed)
    SLUICE_LOG(kWarn, "reload", r << " changed; it applies only after a restart");

  // In order, each step after the one before: the pool (data-layer thread,
  // which publishes it to the dispatcher), then the controller (dispatcher,
  // ordered after that publication by the same producer), then each I/O
  // thread's request policy; `done` once the last thread has it.
  auto endpoints = next.endpoints;
  net::post(scraper_->context(), [this, endpoints = std::move(endpoints), reload, policy,
                                  res = std::move(res), done = std::move(done)]() mutable {
    static_endpoints_ = std::move(endpoints);
    reconcile_endpoints();
    ctx_.flow_control->reconfigure(
        *data_producer_,
        [reload](flowcontrol::Controller& c) {
          c.apply(std::move(*reload), flowcontrol::Clock::now());
        },
        [this, policy, res = std::move(res), done = std::move(done)]() mutable {
          auto left = std::make_shared<std::atomic<std::size_t>>(workers_.size());
          auto shared_done = std::make_shared<std::function<void(ReloadResult)>>(std::move(done));
          auto shared_res = std::make_shared<ReloadResult>(std::move(res));
          shared_res->ok = true;
          for (auto& w : workers_) {
            net::post(w->ioc, [w = w.get(), policy, left, shared_done, shared_res] {
              w->policy = policy;
              if (left->fetch_sub(1) == 1) (*shared_done)(std::move(*shared_res));
            });
          }
        });
  });
}

void Server::collect_stats(std::function<void(observe::WorkerStats)> done) {
  struct Gather {
    std::mutex mu;  // the scrape's merge only, never a request's path
    observe::WorkerStats merged;
    std::size_t left;
    std::function<void(observe::WorkerStats)> done;
  };
  auto g = std::make_shared<Gather>();
  g->merged = observe::WorkerStats(ctx_.config.server.metrics_max_flows);
  g->left = workers_.size();
  g->done = std::move(done);
  for (auto& wp : workers_) {
    Worker* w = wp.get();
    net::post(w->ioc, [w, g] {
      std::unique_lock lock(g->mu);
      g->merged.merge(w->stats);
      if (--g->left > 0) return;
      observe::WorkerStats out = std::move(g->merged);
      lock.unlock();
      g->done(std::move(out));
    });
  }
}

void Server::publish_endpoints() {
  std::vector<flowcontrol::EndpointIdentity> ids;
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
    const auto& ep = ctx_.endpoints.at(i);
    ids.push_back({ep.config.address, ep.config.engine,
                   scheduling::Labels(ep.config.labels.begin(), ep.config.labels.end()),
                   ep.removed.load()});
  }
  ctx_.flow_control->reconfigure(
      *data_producer_,
      [ids = std::move(ids)](flowcontrol::Controller& c) { c.set_endpoints(ids); });
}

void Server::start_fleet() {
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
  ctx_.fleet = std::make_unique<fleet::FleetSync>(std::move(o), exchange, logger);
  ctx_.fleet->start();
}

namespace {

// The first I/O thread's event loop as the dispatcher's (server.dispatcher).
class IoDispatchHost final : public flowcontrol::DispatchHost {
 public:
  IoDispatchHost(Worker& worker, flowcontrol::ControllerShell& shell)
      : worker_(worker), ioc_(worker.ioc), timer_(ioc_), shell_(shell) {
    worker_.host_inline_dispatcher();
  }
  void post(std::function<void()> fn) override { net::post(ioc_, std::move(fn)); }
  void arm(flowcontrol::TimePoint when) override {
    // Re-arming moves the loop's timer (a syscall): only for an earlier
    // pass; a later one is armed by the pass this timer runs.
    if (armed_ && when >= armed_at_) return;
    armed_ = true;
    armed_at_ = when;
    timer_.expires_at(when);
    timer_.async_wait([this, at = when](boost::system::error_code ec) {
      if (ec || at != armed_at_) return;  // replaced by an earlier one
      armed_ = false;
      shell_.pass();
    });
  }
  void disarm() override {
    armed_ = false;
    armed_at_ = {};
    timer_.cancel();
  }
  bool on_host_thread() const override { return ioc_.get_executor().running_in_this_thread(); }
  void before_pass() override { worker_.begin_inline_pass(); }
  void after_pass() override { worker_.end_inline_pass(); }

 private:
  Worker& worker_;
  net::io_context& ioc_;
  net::steady_timer timer_;
  flowcontrol::ControllerShell& shell_;
  bool armed_ = false;
  flowcontrol::TimePoint armed_at_{};
};

}  // namespace

bool Server::inline_dispatcher() const {
  const auto& d = ctx_.config.server.dispatcher;
  return d == "inline" || (d == "auto" && workers_.size() == 1);
}

void Server::start() {
  if (inline_dispatcher()) {
    dispatch_host_ = std::make_unique<IoDispatchHost>(*workers_[0], *ctx_.flow_control);
    ctx_.flow_control->start_inline(dispatch_host_.get());
  } else {
    ctx_.flow_control->start();
  }
  start_fleet();
  scraper_->start();
  if (watcher_) net::post(scraper_->context(), [this] { watcher_->start(); });
  if (!ctx_.config.dns_endpoints.empty()) {
    // DNS discovery: lookups on the watcher's thread; the pool changes on
    // the data layer's, like an endpoints-file change.
    std::vector<datalayer::DnsName> names;
    for (const auto& e : ctx_.config.dns_endpoints) names.push_back({e.host, e.port});
    datalayer::DnsOptions o;
    o.interval = std::chrono::duration_cast<std::chrono::milliseconds>(
        ctx_.config.server.dns_refresh_interval);
    o.timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(ctx_.config.server.dns_timeout);
    o.servers = ctx_.config.server.dns_servers;
    dns_ = std::make_unique<datalayer::DnsWatcher>(
        std::move(names), o,
        [this](const std::vector<std::vector<std::string>>& found) {
          std::vector<config::EndpointConfig> eps;
          for (std::size_t i = 0; i < found.size(); ++i)
            for (const auto& address : found[i]) {
              config::EndpointConfig e = ctx_.config.dns_endpoints[i];
              const auto hp = config::parse_host_port(address);
              if (!hp) continue;
              e.address = address;
              e.host = std::string(hp->host);
              e.port = hp->port;
              eps.push_back(std::move(e));
            }
          net::post(scraper_->context(), [this, eps = std::move(eps)]() mutable {
            dns_endpoints_ = std::move(eps);
            reconcile_endpoints();
          });
        },
        [](const std::string& message) { SLUICE_LOG(kWarn, "endpoints", message); });
    dns_->start();
  }

  for (auto& w : workers_) guards_.emplace_back(net::make_work_guard(w->ioc));
  net::post(workers_[0]->ioc, [this] { do_accept(); });
  for (auto& w : workers_) {
    w->pool_sweep.emplace(w->ioc);
    sweep_pool(*w);
  }
  for (auto& w : workers_) {
    threads_.emplace_back([this, w = w.get()] {
      pthread_setname_np(pthread_self(), "sluice-io");
      w->ioc.run();
      std::lock_guard lock(done_mu_);
      ++threads_done_;
      done_cv_.notify_all();
    });
  }
}

void Server::sweep_pool(Worker& w) {
  w.pool_sweep->expires_after(std::chrono::seconds(1));
  w.pool_sweep->async_wait([this, &w](boost::system::error_code ec) {
    if (ec || ctx_.shutting_down.load()) return;
    w.pool.sweep(std::chrono::steady_clock::now(), ctx_.config.server.upstream_pool_idle_timeout,
                 [this](std::size_t e) {
                   return e < ctx_.endpoints.size() &&
                          ctx_.endpoints.at(e).removed.load(std::memory_order_relaxed);
                 });
    sweep_pool(w);
  });
}

void Server::do_accept() {
  Worker* target = workers_[next_worker_++ % workers_.size()].get();
  acceptor_->async_accept(target->ioc.get_executor(), [this, target](boost::system::error_code ec,
                                                                     Socket s) {
    if (ec == net::error::operation_aborted || !acceptor_->is_open()) return;
    if (ec) {
      // Out of descriptors and the like: back off briefly instead of
      // spinning, and say so a few times a second at most.
      SLUICE_LOG_LIMITED(kWarn, "listener", "accept failed: " << ec.message());
      auto timer =
          std::make_shared<net::steady_timer>(workers_[0]->ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](boost::system::error_code) {
        if (acceptor_->is_open()) do_accept();
      });
      return;
    }
    auto permit = ctx_.connections.try_acquire();
    if (!permit) {
      // At server.maxConnections: a typed answer, then the close.
      SLUICE_LOG_LIMITED(
          kWarn, "listener",
          "connection refused: " << ctx_.connections.max() << " open (server.maxConnections)");
      ConnectionLimit::refuse(s.native_handle());
      boost::system::error_code ignored;
      s.close(ignored);
      return do_accept();
    }
    boost::system::error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    net::post(target->ioc, [this, target, s = std::move(s), permit = std::move(permit)]() mutable {
      std::make_shared<HttpSession>(std::move(s), *target, ctx_, std::move(permit))->start();
    });
    do_accept();
  });
}

void Server::shutdown() {
  if (threads_.empty()) return;
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
  net::post(workers_[0]->ioc, [this] {
    boost::system::error_code ec;
    acceptor_->close(ec);
  });
  // Idle connections close now; busy ones after their response.
  for (auto& wp : workers_) {
    Worker* w = wp.get();
    net::post(w->ioc, [w] {
      std::vector<HttpSession*> live(w->sessions.begin(), w->sessions.end());
      for (auto* s : live) s->begin_close();
    });
  }
  // Queued requests keep being dispatched (metrics still scraped) until the
  // queue is empty or its deadline passes; a shutdown poll, not a hot path.
  while (ctx_.flow_control->queued() > 0 &&
         std::chrono::steady_clock::now() - start < queue_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::size_t left = ctx_.flow_control->queued();
  if (left > 0)
    SLUICE_LOG(kWarn, "server",
               left << " queued request(s) not dispatched by the deadline end as evicted-other");
  // What is still queued ends now (EvictedOther, 503); their sessions answer
  // on their own threads, which still run.
  if (watcher_) net::post(scraper_->context(), [this] { watcher_->stop(); });
  if (dns_) dns_->stop();
  if (scraper_) scraper_->stop();
  // Leave the fleet before the dispatcher stops (the sync thread's last
  // exchange needs it): the others stop counting this replica's work.
  if (ctx_.fleet) ctx_.fleet->stop();
  ctx_.flow_control->stop();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    net::post(w->ioc, [w] {
      // begin_close may destroy sessions (unlinking them): iterate over a copy.
      std::vector<HttpSession*> live(w->sessions.begin(), w->sessions.end());
      for (auto* s : live) s->begin_close();
      w->pool.close_all();
      if (w->pool_sweep) w->pool_sweep->cancel();
      w->stop_hinting();
    });
    guards_[i].reset();  // run() returns once the last session is gone
  }
  {
    std::unique_lock lock(done_mu_);
    const auto remaining = grace - std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start);
    if (!done_cv_.wait_for(lock, std::max(remaining, std::chrono::nanoseconds(0)),
                           [&] { return threads_done_ == threads_.size(); })) {
      SLUICE_LOG(kWarn, "server", "grace period over; closing remaining connections");
      for (auto& wp : workers_) {
        Worker* w = wp.get();
        net::post(w->ioc, [w] {
          std::vector<HttpSession*> live(w->sessions.begin(), w->sessions.end());
          for (auto* s : live) s->force_close();
          w->pool.close_all();
        });
      }
      if (!done_cv_.wait_for(lock, std::chrono::seconds(2),
                             [&] { return threads_done_ == threads_.size(); })) {
        for (auto& w : workers_) w->ioc.stop();
      }
    }
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  // Handlers still queued on a stopped context hold sessions; destroy them on
  // this thread now that no I/O thread runs.
  for (auto& w : workers_) {
    w->ioc.restart();
    w->ioc.poll();
    w->pool.close_all();
  }
  ctx_.access_log.flush();  // every request's line is out before "stopped"
  SLUICE_LOG(kInfo, "server", "stopped");
}

}  // namespace sluice::proxy
