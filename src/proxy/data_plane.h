// The data plane's runtime: N I/O threads, each running its own
// single-threaded io_context (an implicit strand per connection, no mutex),
// the listeners (plain, TLS) that hand each accepted connection to one of
// them, and the two halves of a graceful shutdown. What feeds it (endpoints, metrics, the
// fleet, reloads) is wired by the composition root (app/gateway.h).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "observe/request_stats.h"
#include "proxy/io_thread.h"
#include "proxy/proxy_context.h"

namespace sluice::proxy {

class DataPlane {
 public:
  // Creates the I/O threads' state (server.threads, else one per core);
  // nothing runs until start().
  explicit DataPlane(ProxyContext& ctx);
  ~DataPlane();

  // Binds the plain listener (throws on failure, at startup). Returns the
  // bound address, e.g. "127.0.0.1:40123".
  std::string bind(const std::string& listen);
  // Binds the TLS listener (server.tls.listen), the same way: each of its
  // connections starts with ctx.tls's current context. The two listeners
  // share server.maxConnections.
  std::string bind_tls(const std::string& listen);
  // Starts the dispatcher: on the first I/O thread's loop (server.dispatcher
  // inline, or auto with one thread), else on its own thread.
  void start_dispatcher();
  // Starts accepting and the I/O threads.
  void start();
  bool running() const { return !threads_.empty(); }

  // Shutdown, first half: no more connections; idle ones close now, busy
  // ones after their current response.
  void stop_accepting();
  // Shutdown, second half (after the dispatcher stopped): waits for the
  // connections until `deadline`, then closes what is left; returns once
  // every I/O thread has exited.
  void finish(std::chrono::steady_clock::time_point deadline);

  // Every I/O thread's request statistics, merged; `done` runs on the
  // thread that contributed last. Any thread.
  void collect_stats(std::function<void(observe::ThreadStats)> done);
  // Gives every I/O thread `policy`, each on its own thread; `done` once
  // the last one has it. Any thread.
  void set_policy(std::shared_ptr<const RequestPolicy> policy, std::function<void()> done);
  // The same for who requests are (auth, tenants, keys).
  void set_authenticator(std::shared_ptr<const auth::Authenticator> a, std::function<void()> done);

 private:
  struct Listener {
    std::optional<boost::asio::ip::tcp::acceptor> acceptor;
    bool tls = false;
  };
  std::string bind_listener(Listener& l, const std::string& listen);
  void do_accept(Listener& l);
  void on_accept(Listener& l, IoThread* target, Socket s);
  // `fn` on every I/O thread, each on its own; `done` after the last.
  void on_every_thread(std::function<void(IoThread&)> fn, std::function<void()> done);
  bool inline_dispatcher() const;

  ProxyContext& ctx_;
  std::vector<std::unique_ptr<IoThread>> io_threads_;
  Listener plain_;
  Listener tls_;
  // server.dispatcher inline: the first I/O thread's loop runs the passes.
  std::unique_ptr<flowcontrol::DispatchHost> dispatch_host_;
  std::size_t next_thread_ = 0;
  std::vector<std::thread> threads_;
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::optional<Guard>> guards_;
  std::mutex done_mu_;  // startup/shutdown only
  std::condition_variable done_cv_;
  std::size_t threads_done_ = 0;
};

}  // namespace sluice::proxy
