// The admin plane: its own listener and thread, JSON in and out (DESIGN.md
// §3.2). Reads and changes of flow-control state run on the dispatcher
// thread (ControllerShell::reconfigure), the single writer; the answer is
// posted back to the admin thread. Mutations need `Authorization: Bearer
// <token>` when a token is configured.
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

  // What the admin plane renders, copied on the dispatcher: the flows, a
  // chunk per dispatcher event (so no step holds decisions up however many
  // flows there are), and the rest of flow control's state, bounded in size.
  struct FlowsSnapshot {
    std::vector<registry::FlowSummary> flows;
    flowcontrol::FairnessParams prices;
    flowcontrol::TimePoint taken{};
  };
  struct TimingCopy {
    std::string extension_point, type, name;
    std::array<std::uint64_t, 13> counts{};
    double sum_seconds = 0;
  };
  struct DispatcherCopy {
    std::vector<flowcontrol::QueueDurationSeries> queue_durations;
    double pool_saturation = 0;
    std::size_t flow_count = 0;
    std::uint64_t flow_limit_rejections = 0;
    std::vector<flowcontrol::Controller::BandCeiling> ceilings;
    std::uint64_t ceiling_holds = 0;
    std::uint64_t headroom_holds = 0;
    flowcontrol::Controller::EvictionStats eviction;
    std::vector<TimingCopy> timings;
    bool failed = false;
  };
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
  // Calls `fn` on this thread with a copy of every flow made after the call.
  void with_flows(std::function<void(std::shared_ptr<const FlowsSnapshot>)> fn);
  void copy_flows_step(std::shared_ptr<FlowsSnapshot> snapshot);
  // Runs `fn` on the dispatcher, then `respond(fn's reply)` on this thread.
  void on_dispatcher(std::function<Reply(flowcontrol::Controller&)> fn,
                     std::function<void(Reply)> respond);

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
  std::unique_ptr<flowcontrol::ControllerShell::Producer> producer_;  // admin thread only
  std::thread thread_;
  // with_flows callers served by the copy in progress, and those that came
  // after it began (served by the next copy). Admin thread only.
  std::vector<std::function<void(std::shared_ptr<const FlowsSnapshot>)>> flow_waiters_;
  std::vector<std::function<void(std::shared_ptr<const FlowsSnapshot>)>> next_flow_waiters_;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace sluice::admin
