#include "proxy/data_plane.h"

#include <pthread.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <random>

#include "config/units.h"
#include "observe/log.h"
#include "proxy/client_connection.h"

namespace sluice::proxy {

namespace net = boost::asio;
using tcp = net::ip::tcp;

DataPlane::DataPlane(ProxyContext& ctx) : ctx_(ctx) {
  const auto& config = ctx_.config;
  std::size_t n = config.server.threads > 0 ? static_cast<std::size_t>(config.server.threads)
                                            : std::max(1u, std::thread::hardware_concurrency());
  std::random_device rd;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t id_prefix = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    io_threads_.push_back(std::make_unique<IoThread>(i, ctx_, id_prefix));
  }
}

DataPlane::~DataPlane() {
  if (!running()) return;
  stop_accepting();
  finish(std::chrono::steady_clock::now() + ctx_.config.server.shutdown_grace_period);
}

std::string DataPlane::bind(const std::string& listen) { return bind_listener(plain_, listen); }

std::string DataPlane::bind_tls(const std::string& listen) {
  tls_.tls = true;
  return bind_listener(tls_, listen);
}

std::string DataPlane::bind_listener(Listener& l, const std::string& listen) {
  auto hp = config::parse_host_port(listen);
  if (!hp) throw std::runtime_error("invalid listen address '" + listen + "'");
  tcp::resolver resolver(io_threads_[0]->context());
  auto addr = resolver.resolve(std::string(hp->host), std::to_string(hp->port)).begin()->endpoint();
  auto& acceptor = l.acceptor.emplace(io_threads_[0]->context());
  acceptor.open(addr.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(addr);
  acceptor.listen(net::socket_base::max_listen_connections);
  auto bound = acceptor.local_endpoint();
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(bound.port());
}

namespace {

// The first I/O thread's event loop as the dispatcher's (server.dispatcher).
class IoDispatchHost final : public flowcontrol::DispatchHost {
 public:
  IoDispatchHost(IoThread& thread, flowcontrol::ControllerShell& shell)
      : thread_(thread), ioc_(thread.context()), timer_(ioc_), shell_(shell) {
    thread_.host_inline_dispatcher();
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
  void before_pass() override { thread_.begin_inline_pass(); }
  void after_pass() override { thread_.end_inline_pass(); }

 private:
  IoThread& thread_;
  net::io_context& ioc_;
  net::steady_timer timer_;
  flowcontrol::ControllerShell& shell_;
  bool armed_ = false;
  flowcontrol::TimePoint armed_at_{};
};

}  // namespace

bool DataPlane::inline_dispatcher() const {
  const auto& d = ctx_.config.server.dispatcher;
  return d == "inline" || (d == "auto" && io_threads_.size() == 1);
}

void DataPlane::start_dispatcher() {
  if (inline_dispatcher()) {
    dispatch_host_ = std::make_unique<IoDispatchHost>(*io_threads_[0], *ctx_.flow_control);
    ctx_.flow_control->start_inline(dispatch_host_.get());
  } else {
    ctx_.flow_control->start();
  }
}

void DataPlane::start() {
  for (auto& w : io_threads_) guards_.emplace_back(net::make_work_guard(w->context()));
  for (Listener* l : {&plain_, &tls_})
    if (l->acceptor) net::post(io_threads_[0]->context(), [this, l] { do_accept(*l); });
  for (auto& w : io_threads_) {
    w->start_pool_sweep(ctx_);
  }
  for (auto& w : io_threads_) {
    threads_.emplace_back([this, w = w.get()] {
      pthread_setname_np(pthread_self(), "sluice-io");
      w->context().run();
      std::lock_guard lock(done_mu_);
      ++threads_done_;
      done_cv_.notify_all();
    });
  }
}

void DataPlane::collect_stats(std::function<void(observe::ThreadStats)> done) {
  struct Gather {
    std::mutex mu;  // the scrape's merge only, never a request's path
    observe::ThreadStats merged;
    std::size_t left;
    std::function<void(observe::ThreadStats)> done;
  };
  auto g = std::make_shared<Gather>();
  g->merged = observe::ThreadStats(ctx_.config.server.metrics_max_flows);
  g->left = io_threads_.size();
  g->done = std::move(done);
  for (auto& wp : io_threads_) {
    IoThread* w = wp.get();
    net::post(w->context(), [w, g] {
      std::unique_lock lock(g->mu);
      g->merged.merge(w->stats());
      if (--g->left > 0) return;
      observe::ThreadStats out = std::move(g->merged);
      lock.unlock();
      g->done(std::move(out));
    });
  }
}

void DataPlane::on_every_thread(std::function<void(IoThread&)> fn, std::function<void()> done) {
  auto left = std::make_shared<std::atomic<std::size_t>>(io_threads_.size());
  auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
  auto shared_fn = std::make_shared<std::function<void(IoThread&)>>(std::move(fn));
  for (auto& w : io_threads_) {
    net::post(w->context(), [w = w.get(), shared_fn, left, shared_done] {
      (*shared_fn)(*w);
      if (left->fetch_sub(1) == 1) (*shared_done)();
    });
  }
}

void DataPlane::set_policy(std::shared_ptr<const RequestPolicy> policy,
                           std::function<void()> done) {
  on_every_thread([policy](IoThread& w) { w.set_policy(policy); }, std::move(done));
}

void DataPlane::set_authenticator(std::shared_ptr<const auth::Authenticator> a,
                                  std::function<void()> done) {
  on_every_thread([a](IoThread& w) { w.set_authenticator(a); }, std::move(done));
}

void DataPlane::do_accept(Listener& l) {
  IoThread* target = io_threads_[next_thread_++ % io_threads_.size()].get();
  l.acceptor->async_accept(
      target->context().get_executor(), [this, &l, target](boost::system::error_code ec, Socket s) {
        if (ec == net::error::operation_aborted || !l.acceptor->is_open()) return;
        if (!ec) return on_accept(l, target, std::move(s));
        // Out of descriptors and the like: back off briefly instead of
        // spinning, and say so a few times a second at most.
        SLUICE_LOG_LIMITED(kWarn, "listener", "accept failed: " << ec.message());
        auto timer = std::make_shared<net::steady_timer>(io_threads_[0]->context(),
                                                         std::chrono::milliseconds(50));
        timer->async_wait([this, &l, timer](boost::system::error_code) {
          if (l.acceptor->is_open()) do_accept(l);
        });
      });
}

void DataPlane::on_accept(Listener& l, IoThread* target, Socket s) {
  auto permit = ctx_.connections.try_acquire();
  if (!permit) {
    // At server.maxConnections: a typed answer, then the close. On the TLS
    // listener no answer: the client expects a handshake, not plain HTTP.
    SLUICE_LOG_LIMITED(
        kWarn, "listener",
        "connection refused: " << ctx_.connections.max() << " open (server.maxConnections)");
    ConnectionLimit::refuse(s.native_handle(), /*answer=*/!l.tls);
    boost::system::error_code ignored;
    s.close(ignored);
    return do_accept(l);
  }
  boost::system::error_code ignored;
  s.set_option(tcp::no_delay(true), ignored);
  // The TLS context a connection starts with is taken here: a reload that
  // installs a new one changes only the connections accepted after it.
  std::shared_ptr<TlsServerContext> tls = l.tls ? ctx_.tls->current() : nullptr;
  net::post(target->context(), [this, target, s = std::move(s), permit = std::move(permit),
                                tls = std::move(tls)]() mutable {
    std::make_shared<ClientConnection>(std::move(s), *target, ctx_, std::move(permit),
                                       std::move(tls))
        ->start();
  });
  do_accept(l);
}

void DataPlane::stop_accepting() {
  net::post(io_threads_[0]->context(), [this] {
    boost::system::error_code ec;
    for (Listener* l : {&plain_, &tls_})
      if (l->acceptor) l->acceptor->close(ec);
  });
  // Idle connections close now; busy ones after their response.
  for (auto& wp : io_threads_) {
    IoThread* w = wp.get();
    net::post(w->context(),
              [w] { w->for_each_connection([](ClientConnection& c) { c.begin_close(); }); });
  }
}

void DataPlane::finish(std::chrono::steady_clock::time_point deadline) {
  for (std::size_t i = 0; i < io_threads_.size(); ++i) {
    IoThread* w = io_threads_[i].get();
    net::post(w->context(), [w] {
      // begin_close may end connections (unlinking them): for_each_connection
      // iterates over a copy.
      w->for_each_connection([](ClientConnection& c) { c.begin_close(); });
      w->stop_upstreams();
    });
    guards_[i].reset();  // run() returns once the last session is gone
  }
  {
    std::unique_lock lock(done_mu_);
    const auto remaining = deadline - std::chrono::steady_clock::now();
    if (!done_cv_.wait_for(lock, std::max(remaining, std::chrono::steady_clock::duration(0)),
                           [&] { return threads_done_ == threads_.size(); })) {
      SLUICE_LOG(kWarn, "server", "grace period over; closing remaining connections");
      for (auto& wp : io_threads_) {
        IoThread* w = wp.get();
        net::post(w->context(), [w] {
          w->for_each_connection([](ClientConnection& c) { c.force_close(); });
          w->close_pool();
        });
      }
      if (!done_cv_.wait_for(lock, std::chrono::seconds(2),
                             [&] { return threads_done_ == threads_.size(); })) {
        for (auto& w : io_threads_) w->context().stop();
      }
    }
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  // Handlers still queued on a stopped context hold connections; destroy them on
  // this thread now that no I/O thread runs.
  for (auto& w : io_threads_) {
    w->context().restart();
    w->context().poll();
    w->close_pool();
  }
}

}  // namespace sluice::proxy
