// What a route handler of the admin plane may use, and nothing more (private
// to src/admin): the data plane's shared context, the host (Backend: reload,
// statistics, the fleet), and the admin thread's two ways to flow control's
// state: a call on the dispatcher thread (the single writer) whose answer
// comes back to the admin thread, and a copy of every flow.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "admin/admin_requests.h"
#include "admin/backend.h"
#include "flowcontrol/controller.h"
#include "flowcontrol/controller_shell.h"
#include "registry/flow_registry.h"

namespace sluice::proxy {
struct ProxyContext;
}  // namespace sluice::proxy

namespace sluice::admin {

// Called exactly once with the answer, on the admin thread.
using Respond = std::function<void(AdminReply)>;

// What the admin plane renders, copied on the dispatcher a chunk per
// dispatcher event (so no step holds decisions up however many flows there
// are), with the prices to charge tokens at.
struct FlowsSnapshot {
  std::vector<registry::FlowSummary> flows;
  flowcontrol::FairnessParams prices;
  flowcontrol::TimePoint taken{};
};

class HandlerContext {
 public:
  // `ioc`: the admin thread's; it outlives this.
  HandlerContext(Backend& host, boost::asio::io_context& ioc);

  proxy::ProxyContext& ctx;
  Backend& backend;
  fleet::FleetSync* fleet() { return backend.fleet(); }

  // Runs `fn` on the admin thread.
  void post(std::function<void()> fn);
  // Runs `fn` on the dispatcher, then `then` on the admin thread.
  void dispatch(std::function<void(flowcontrol::Controller&)> fn, std::function<void()> then);
  // Runs `fn` on the dispatcher, then `respond(fn's reply)` on the admin
  // thread; a `fn` that throws answers 500.
  void on_dispatcher(std::function<AdminReply(flowcontrol::Controller&)> fn, Respond respond);
  // Calls `fn` on the admin thread with a copy of every flow made after the
  // call.
  void with_flows(std::function<void(std::shared_ptr<const FlowsSnapshot>)> fn);

 private:
  void copy_flows_step(std::shared_ptr<FlowsSnapshot> snapshot);

  boost::asio::io_context& ioc_;
  std::unique_ptr<flowcontrol::ControllerShell::Producer> producer_;  // admin thread only
  // with_flows callers served by the copy in progress, and those that came
  // after it began (served by the next copy). Admin thread only.
  std::vector<std::function<void(std::shared_ptr<const FlowsSnapshot>)>> flow_waiters_;
  std::vector<std::function<void(std::shared_ptr<const FlowsSnapshot>)>> next_flow_waiters_;
};

}  // namespace sluice::admin
