// Keep-alive connections to model-server endpoints, one pool per I/O thread.
//
// Each I/O thread owns its io_context, its sessions and its pool, so the pool
// needs no lock (shared-nothing, as in Seastar). A connection is given back
// only after a complete response without `Connection: close` and with no
// unread bytes; the pool keeps at most `max_idle_per_endpoint` idle
// connections per endpoint and closes the rest.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <cstddef>
#include <memory>
#include <vector>

namespace sluice::server {

// Streams bound to the concrete executor of an I/O thread's io_context: no
// type-erased executor copies inside every asynchronous operation.
using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
using Stream = boost::beast::basic_stream<boost::asio::ip::tcp, Executor>;

struct UpstreamConnection {
  explicit UpstreamConnection(Executor ex, std::size_t endpoint_index)
      : stream(std::move(ex)), endpoint(endpoint_index) {}

  Stream stream;
  boost::beast::flat_buffer buffer;
  std::size_t endpoint;
};

class UpstreamPool {
 public:
  UpstreamPool(std::size_t endpoints, std::size_t max_idle_per_endpoint)
      : idle_(endpoints), max_idle_(max_idle_per_endpoint) {}

  // Most recently returned idle connection to `endpoint` (the likeliest to be
  // still open), or null.
  std::unique_ptr<UpstreamConnection> take(std::size_t endpoint);
  void give_back(std::unique_ptr<UpstreamConnection> conn);
  void close_all();

  std::size_t idle_count(std::size_t endpoint) const {
    return endpoint < idle_.size() ? idle_[endpoint].size() : 0;
  }

 private:
  std::vector<std::vector<std::unique_ptr<UpstreamConnection>>> idle_;
  std::size_t max_idle_;
};

}  // namespace sluice::server
