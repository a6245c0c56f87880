// Flow control's credit for one dispatched request: handed back exactly once,
// by release() with the output tokens counted, or by the destructor with the
// last count reported, whichever way the request ends (Seastar's
// semaphore_units). Lives on the request's I/O thread.
#pragma once

#include <cstdint>
#include <utility>

namespace sluice::proxy {

class IoThread;

class DispatchTicket {
 public:
  DispatchTicket() = default;
  DispatchTicket(IoThread& thread, bool gated, std::uint64_t id, bool notify_started = false)
      : thread_(&thread), gated_(gated), id_(id), started_(!notify_started) {}
  DispatchTicket(DispatchTicket&& o) noexcept { *this = std::move(o); }
  DispatchTicket& operator=(DispatchTicket&& o) noexcept {
    if (this != &o) {
      release(reported_);
      thread_ = std::exchange(o.thread_, nullptr);
      gated_ = o.gated_;
      id_ = std::exchange(o.id_, 0);
      reported_ = std::exchange(o.reported_, 0);
      started_ = std::exchange(o.started_, false);
    }
    return *this;
  }
  DispatchTicket(const DispatchTicket&) = delete;
  DispatchTicket& operator=(const DispatchTicket&) = delete;
  ~DispatchTicket() { release(reported_); }

  std::uint64_t id() const { return id_; }
  explicit operator bool() const { return id_ != 0; }
  // Charges output tokens as they stream (VTC); keeps the count for release.
  void report(std::uint64_t output_tokens);
  std::uint64_t reported() const { return reported_; }
  // The response's first body bytes arrived: told once (llm-d's
  // StartOfStream, when inflight-load-producer releases prompt tokens),
  // and only if the decision asked (notify_started): no event otherwise.
  void started();
  void release(std::uint64_t output_tokens);

 private:
  IoThread* thread_ = nullptr;
  bool gated_ = false;
  std::uint64_t id_ = 0;
  std::uint64_t reported_ = 0;
  bool started_ = false;  // told, or nothing to tell
};

}  // namespace sluice::proxy
