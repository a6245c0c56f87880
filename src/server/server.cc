#include "server/server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <random>

#include "config/units.h"
#include "server/http_session.h"
#include "flowcontrol/from_config.h"
#include "server/log.h"

namespace sluice::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

ProxyContext::ProxyContext(const config::Config& c) : config(c), endpoints(c.endpoints) {
  for (const auto& o : c.objectives) objectives[o.name] = ObjectiveInfo{o.priority, o.ttl};
  auto controller = flowcontrol::make_controller(c);
  preparation = controller->scheduler()->preparation();
  flow_control = std::make_unique<flowcontrol::ControllerShell>(std::move(controller));
  if (!c.flow_control.enabled) legacy_detector = flowcontrol::make_detector(c.saturation_detector);
}

bool ProxyContext::pool_saturated() const {
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
    load.in_flight = static_cast<std::uint32_t>(std::max(0, ep.in_flight.load(std::memory_order_relaxed)));
    if (ep.usable(now) && legacy_detector->has_room(load, now)) return false;
  }
  return true;
}

void Worker::wake_dispatcher() {
  if (wake_scheduled_) return;
  wake_scheduled_ = true;
  net::post(ioc, [this] {
    wake_scheduled_ = false;
    shell->wake();
  });
}

void Worker::deliver(std::shared_ptr<HttpSession> session, const flowcontrol::Decision& d) {
  inbox_.enqueue(Delivery{std::move(session), d});
  if (!drain_pending_.exchange(true, std::memory_order_acq_rel))
    net::post(ioc, [this] { drain_inbox(); });
}

void Worker::drain_inbox() {
  // Reset first: a delivery racing with this drain either lands in this
  // loop or posts another drain (harmless when empty).
  drain_pending_.store(false, std::memory_order_release);
  Delivery d;
  while (inbox_.try_dequeue(d)) {
    d.session->on_decision(d.decision);
    d.session.reset();
  }
}

Server::Server(const config::Config& config) : ctx_(config) {
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
  // Resolve endpoints once, at startup: the static pool does not change.
  tcp::resolver resolver(workers_[0]->ioc);
  for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
    const auto& ec = ctx_.endpoints.at(i).config;
    auto results = resolver.resolve(ec.host, std::to_string(ec.port));
    ctx_.upstream_addresses.push_back(results.begin()->endpoint());
  }
  // Endpoint metrics: into the endpoint state (legacy admission reads them
  // there) and, with flow control, to the dispatcher.
  if (ctx_.endpoints.size() > 0) {
    std::vector<datalayer::ScrapeTarget> targets;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i) {
      const auto& ec = ctx_.endpoints.at(i).config;
      targets.push_back({ctx_.upstream_addresses[i], ec.address, ec.engine});
    }
    scraper_producer_ = ctx_.flow_control->make_producer();
    scraper_ = std::make_unique<datalayer::MetricsScraper>(
        std::move(targets), datalayer::ScraperOptions{},
        [this](std::size_t endpoint, const datalayer::EngineMetrics& m) {
          ctx_.endpoints.at(endpoint).store_metrics(m.waiting, m.running, m.kv_cache_usage,
                                                    datalayer::Clock::now());
          flowcontrol::EndpointMetrics em;
          em.waiting = m.waiting;
          em.running = m.running;
          em.kv_cache_usage = m.kv_cache_usage;
          em.active_models = m.active_models;
          em.waiting_models = m.waiting_models;
          em.max_active_models = m.max_lora;
          em.cache_block_size = m.cache_block_size;
          em.cache_num_gpu_blocks = m.cache_num_gpu_blocks;
          auto* shell = ctx_.flow_control.get();
          shell->update_metrics(*scraper_producer_, endpoint, em);
          shell->wake();
        });
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
  return host + ":" + std::to_string(bound.port());
}

void Server::start() {
  if (ctx_.flow_control) ctx_.flow_control->start();
  if (scraper_) scraper_->start();
  for (auto& w : workers_) guards_.emplace_back(net::make_work_guard(w->ioc));
  net::post(workers_[0]->ioc, [this] { do_accept(); });
  for (auto& w : workers_) {
    threads_.emplace_back([this, w = w.get()] {
      w->ioc.run();
      std::lock_guard lock(done_mu_);
      ++threads_done_;
      done_cv_.notify_all();
    });
  }
}

void Server::do_accept() {
  Worker* target = workers_[next_worker_++ % workers_.size()].get();
  acceptor_->async_accept(target->ioc.get_executor(), [this, target](boost::system::error_code ec, Socket s) {
    if (ec == net::error::operation_aborted || !acceptor_->is_open()) return;
    if (ec) {
      // Out of descriptors and the like: back off briefly instead of spinning.
      SLUICE_LOG(kWarn, "listener", "accept failed: " << ec.message());
      auto timer = std::make_shared<net::steady_timer>(workers_[0]->ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](boost::system::error_code) {
        if (acceptor_->is_open()) do_accept();
      });
      return;
    }
    boost::system::error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    net::post(target->ioc, [this, target, s = std::move(s)]() mutable {
      std::make_shared<HttpSession>(std::move(s), *target, ctx_)->start();
    });
    do_accept();
  });
}

void Server::shutdown() {
  if (threads_.empty()) return;
  const auto grace = ctx_.config.server.shutdown_grace_period;
  SLUICE_LOG(kInfo, "server", "shutting down: no longer accepting; in-flight requests have "
                                  << std::chrono::duration_cast<std::chrono::milliseconds>(grace).count()
                                  << " ms to finish");
  ctx_.shutting_down.store(true);
  net::post(workers_[0]->ioc, [this] {
    boost::system::error_code ec;
    acceptor_->close(ec);
  });
  // Queued requests end now (EvictedOther, 503); their sessions answer on
  // their own threads, which still run.
  if (scraper_) scraper_->stop();
  if (ctx_.flow_control) ctx_.flow_control->stop();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker* w = workers_[i].get();
    net::post(w->ioc, [w] {
      // begin_close may destroy sessions (unlinking them): iterate over a copy.
      std::vector<HttpSession*> live(w->sessions.begin(), w->sessions.end());
      for (auto* s : live) s->begin_close();
      w->pool.close_all();
    });
    guards_[i].reset();  // run() returns once the last session is gone
  }
  {
    std::unique_lock lock(done_mu_);
    if (!done_cv_.wait_for(lock, grace, [&] { return threads_done_ == threads_.size(); })) {
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
  SLUICE_LOG(kInfo, "server", "stopped");
}

}  // namespace sluice::server
