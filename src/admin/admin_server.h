// The admin plane: its own listener and thread, JSON in and out (DESIGN.md
// §3.2). Reads and changes of flow-control state run on the dispatcher
// thread (ControllerShell::reconfigure), the single writer; the answer is
// posted back to the admin thread. With a token configured, every call but
// the probes (and /metrics with server.adminOpenMetrics) needs
// `Authorization: Bearer <token>`. The paths, their methods and handlers:
// the route table in routes.cc; the handlers: one file per resource.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin/admin_requests.h"
#include "admin/backend.h"
#include "admin/handler_context.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/controller_shell.h"
#include "registry/flow_registry.h"

namespace sluice::admin {

class AdminSession;

class AdminServer {
 public:
  // `token` empty: mutations are allowed without one (loopback only; main
  // refuses a non-loopback admin address without a token).
  AdminServer(Backend& backend, std::string token);
  ~AdminServer();

  // Binds (throws at startup) and returns the bound "HOST:PORT".
  std::string bind(const std::string& listen);
  void start();
  void stop();

  // Internal: one request -> (status, JSON body); `respond` is called
  // exactly once, on the admin thread.
  using Reply = AdminReply;

  void handle(const std::string& method, const std::string& target,
              const std::string& authorization, const std::string& body,
              std::function<void(Reply)> respond);
  // A fleet: a change made through another replica's admin API (a flow
  // override, a band, a fleet drain), applied here as if made here: no
  // token (it was checked there), not stored again. Any thread.
  struct FleetOperationView {
    std::string method, target, body;
  };
  void apply_replicated(const FleetOperationView& op);

 private:
  void accept();
  // handle() past the token check; `replicated`: from another replica.
  void route(const std::string& method, const std::string& target, const std::string& body,
             std::function<void(Reply)> respond, bool replicated);

  Backend& backend_;
  proxy::ProxyContext& ctx_;
  fleet::FleetSync* fleet() { return backend_.fleet(); }
  std::string token_;
  // Connections whose request is not yet whole (waiting for it, or reading
  // it), oldest first. At adminMaxConnections a new connection takes the
  // oldest one's place instead of being refused: a flood of connections
  // that never finish a request cannot keep the liveness and readiness
  // probes out (which take a slot for a millisecond). Admin thread only.
  // Declared before ioc_: sessions that its destructor destroys unlist
  // themselves.
  friend class AdminSession;
  std::list<AdminSession*> reading_;
  boost::asio::io_context ioc_{1};
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  // What the route handlers work with (its dispatcher producer and the
  // flow copies' waiters are the admin thread's).
  HandlerContext handlers_{backend_, ioc_};
  std::thread thread_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace sluice::admin
