#include "admin/handler_context.h"

#include <boost/asio/post.hpp>

#include "observe/log.h"
#include "proxy/proxy_context.h"

namespace sluice::admin {

namespace net = boost::asio;

HandlerContext::HandlerContext(Backend& host, net::io_context& ioc)
    : ctx(host.context()), backend(host), ioc_(ioc) {
  producer_ = ctx.flow_control->make_producer();
}

void HandlerContext::post(std::function<void()> fn) { net::post(ioc_, std::move(fn)); }

void HandlerContext::dispatch(std::function<void(flowcontrol::Controller&)> fn,
                              std::function<void()> then) {
  ctx.flow_control->reconfigure(
      *producer_, std::move(fn),
      [this, then = std::move(then)]() mutable { net::post(ioc_, std::move(then)); });
}

void HandlerContext::on_dispatcher(std::function<AdminReply(flowcontrol::Controller&)> fn,
                                   Respond respond) {
  auto reply = std::make_shared<AdminReply>();
  dispatch(
      [fn = std::move(fn), reply](flowcontrol::Controller& c) {
        // Runs on the dispatcher: nothing an admin call carries may end it.
        try {
          *reply = fn(c);
        } catch (const std::exception& e) {
          SLUICE_LOG(kError, "admin", "admin call failed on the dispatcher: " << e.what());
          *reply = error_reply(500, "internal-error", "the admin call failed; see the log");
        }
      },
      [reply, respond = std::move(respond)] { respond(std::move(*reply)); });
}

void HandlerContext::with_flows(std::function<void(std::shared_ptr<const FlowsSnapshot>)> fn) {
  if (!flow_waiters_.empty()) {
    // A copy is under way, begun before this call: the next one serves it.
    next_flow_waiters_.push_back(std::move(fn));
    return;
  }
  flow_waiters_.push_back(std::move(fn));
  auto snapshot = std::make_shared<FlowsSnapshot>();
  dispatch([](flowcontrol::Controller& c) { c.registry().begin_flow_copy(); },
           [this, snapshot] { copy_flows_step(snapshot); });
}

void HandlerContext::copy_flows_step(std::shared_ptr<FlowsSnapshot> snapshot) {
  // Flows copied per dispatcher event: tens of microseconds.
  static constexpr std::size_t kChunk = 256;
  auto done = std::make_shared<bool>(false);
  dispatch(
      [snapshot, done](flowcontrol::Controller& c) {
        // On the dispatcher: nothing here may end the process (a bad_alloc
        // ends this copy with what it has; the registry is unchanged).
        try {
          *done = c.registry().continue_flow_copy(kChunk, snapshot->flows);
        } catch (const std::exception& e) {
          SLUICE_LOG(kError, "admin", "copying the flows failed: " << e.what());
          c.registry().abandon_flow_copy();
          *done = true;
        }
        if (*done) {
          snapshot->prices = c.fairness_prices();
          snapshot->taken = flowcontrol::Clock::now();
        }
      },
      [this, snapshot, done] {
        if (!*done) return copy_flows_step(snapshot);
        auto waiters = std::move(flow_waiters_);
        flow_waiters_.clear();
        std::shared_ptr<const FlowsSnapshot> result = snapshot;
        for (auto& w : waiters) w(result);
        if (!next_flow_waiters_.empty()) {
          auto next = std::move(next_flow_waiters_);
          next_flow_waiters_.clear();
          auto first = std::move(next.front());
          next.erase(next.begin());
          with_flows(std::move(first));
          for (auto& w : next) flow_waiters_.push_back(std::move(w));
        }
      });
}

}  // namespace sluice::admin
