// The access log: one line per finished request, as JSON lines or as
// space-separated key=value text. Off unless configured (server.accessLog,
// --access-log).
//
// An I/O thread never blocks on the file: it formats the line and appends it
// to its own bounded buffer (a mutex only the writer thread ever contends
// for, while it swaps the buffer out). A writer thread flushes every buffer
// every 100 ms, or sooner when one fills past a quarter, with one write(2)
// per buffer (O_APPEND, so the file may be shared). A line that does not fit
// (the disk or a pipe is slower than the requests for a while) is dropped
// and counted (dropped(): sluice_access_log_dropped_total), never waited
// for; so is a line a failed write(2) lost. Shutdown flushes what is left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flowcontrol/outcome_response.h"

namespace sluice::observe {

struct AccessRecord {
  std::string_view request_id;
  std::string_view method;
  std::string_view path;
  std::string_view flow;    // fairness id ("" for non-inference requests)
  std::string_view tenant;  // the authenticated tenant ("" if none)
  std::string_view key_id;  // its API key's id or "jwt:<kid>"; never the key
  int priority = 0;
  std::string_view objective;
  std::string_view model;
  std::string_view outcome;   // served, a dropped reason, an error code, client-closed
  std::string_view endpoint;  // "" if none was tried
  int status = 0;
  double queue_ms = 0;     // request read -> dispatch decision
  double upstream_ms = 0;  // dispatch -> last byte (0 if never dispatched)
  double total_ms = 0;
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  // The verified TLS client certificate's name; on the line only when set.
  std::string_view client_cert;
  // The quota that refused the request, or "shadow:<name>" for a shadow
  // limit that would have; on the line only when set.
  std::string_view quota;
};

class AccessLog {
 public:
  // Per I/O thread: lines waiting for the writer.
  static constexpr std::size_t kBufferBytes = 4u << 20;

  AccessLog() = default;
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;
  ~AccessLog();  // flushes and stops the writer
  // `target`: "-" for standard error, else a file opened for append. Starts
  // the writer thread. Returns false (and `error`) if the file cannot be
  // opened. Once, before any write.
  bool open(const std::string& target, const std::string& format, std::string& error);
  bool enabled() const { return fd_ >= 0; }
  // Formats into `scratch` (the caller's, reused) and queues one line; any
  // thread, never blocks on I/O.
  void write(const AccessRecord& r, std::string& scratch);
  // Writes out every queued line now (the caller's thread). Shutdown.
  void flush();
  // Lines lost: a buffer was full, or a write(2) failed.
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct ThreadBuffer {
    std::mutex mu;
    std::string data;
    bool signalled = false;  // the writer was woken for this fill
  };
  ThreadBuffer& buffer_for_this_thread();
  void append_line(const std::string& line);
  void run();
  // Swaps every buffer out and writes it; callers hold write_mu_.
  void flush_locked();
  void write_out(const std::string& data);

  int fd_ = -1;
  bool owned_ = false;
  bool json_ = true;
  std::uint64_t id_ = 0;  // tells this log from an earlier one at the same address
  std::atomic<std::uint64_t> dropped_{0};
  std::mutex registry_mu_;  // buffers_ (a thread's first line only)
  std::vector<std::pair<std::thread::id, std::unique_ptr<ThreadBuffer>>> buffers_;
  std::mutex write_mu_;  // one flusher at a time (writer thread, flush())
  std::string out_;      // the buffer being written (under write_mu_)
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // under wake_mu_
  std::thread writer_;
};

// The access log's JSON strings are escaped as the error bodies' are.
using flowcontrol::append_json_string;

}  // namespace sluice::observe
