// Keep-alive connections to model-server endpoints, one pool per I/O thread.
//
// Each I/O thread owns its io_context, its sessions and its pool, so the pool
// needs no lock (shared-nothing, as in Seastar). A connection is given back
// only after a complete response without `Connection: close` and with no
// unread bytes; the pool keeps at most `max_idle_per_endpoint` idle
// connections per endpoint and closes the rest. sweep() (a timer of the I/O
// thread) closes those idle longer than server.upstreamPoolIdleTimeout and
// every idle one of an endpoint that left the pool, so descriptors do not
// stay with connections nobody will take again.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "proxy/hinted_reads.h"
#include "proxy/upstream_stream.h"

namespace sluice::proxy {

using Stream = UpstreamStream;

// A HintedReads::Hook: watched for the endpoint's close once a read of it
// was hinted mid-stream (proxy/hinted_reads.h).
struct UpstreamConnection : HintedReads::Hook {
  explicit UpstreamConnection(Executor ex, std::size_t endpoint_index)
      : stream(std::move(ex)), endpoint(endpoint_index) {}

  Stream stream;
  boost::beast::flat_buffer buffer;
  std::size_t endpoint;
  // The port connected to on the endpoint's host when not its own (data
  // parallelism: the host's primaryPort), else 0. Pooled with the
  // endpoint's connections, under the same bound; taken only by a request
  // for the same port.
  std::uint16_t port = 0;
  std::chrono::steady_clock::time_point idle_since{};  // set when given back
};

class UpstreamPool {
 public:
  UpstreamPool(std::size_t endpoints, std::size_t max_idle_per_endpoint)
      : idle_(endpoints), max_idle_(max_idle_per_endpoint) {}

  // Most recently returned idle connection to `endpoint` (the likeliest to be
  // still open), or null.
  std::unique_ptr<UpstreamConnection> take(std::size_t endpoint);
  void give_back(std::unique_ptr<UpstreamConnection> conn,
                 std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // Closes every idle connection, and those given back from now on: at
  // shutdown, a connection a finishing request gives back must not keep
  // its stream's timer wait, and so its I/O thread's loop, alive.
  void close_all();
  // Closes idle connections given back before `now - max_idle`, and all
  // those of endpoints for which `gone(endpoint)` is true. Returns how many.
  std::size_t sweep(std::chrono::steady_clock::time_point now,
                    std::chrono::steady_clock::duration max_idle,
                    const std::function<bool(std::size_t)>& gone);

  std::size_t idle_count(std::size_t endpoint) const {
    return endpoint < idle_.size() ? idle_[endpoint].size() : 0;
  }

 private:
  std::vector<std::vector<std::unique_ptr<UpstreamConnection>>> idle_;
  std::size_t max_idle_;
  bool closed_ = false;
};

}  // namespace sluice::proxy
