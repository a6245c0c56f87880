// Watches a file (server.endpointsFile, auth.apiKeys.file) by polling its
// identity (inode, size, modification time) on the data layer's thread, and
// calls back on that thread when it changed: the callback reads and applies
// it. Polling, not inotify: it sees editors' write-and-rename and files on
// mounted ConfigMaps (symlink swaps) alike. A file that fails to load
// (the callback throws ConfigError) keeps what was loaded before; the
// error is reported once per content.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace sluice::datalayer {

class FileWatcher {
 public:
  // Reads `path` and applies it; throws config::ConfigError if it cannot.
  using OnChange = std::function<void(const std::string& path)>;
  using OnError = std::function<void(const std::string& message)>;

  // `what`: what the file holds, for messages ("endpoints", "keys").
  FileWatcher(boost::asio::io_context& ioc, std::string path, std::chrono::nanoseconds interval,
              std::string what, OnChange on_change, OnError on_error);

  // Loads the file now, remembering its identity (startup: the
  // ConfigError propagates).
  void load_now();
  // Starts polling (posts onto the context). stop() must run on its thread
  // or before the context runs.
  void start();
  void stop();

 private:
  struct Identity {
    unsigned long long inode = 0, size = 0;
    long long mtime_ns = 0;
    bool exists = false;
    bool operator==(const Identity&) const = default;
  };
  Identity identity() const;
  void arm();
  void poll();

  boost::asio::steady_timer timer_;
  std::string path_;
  std::chrono::nanoseconds interval_;
  std::string what_;
  OnChange on_change_;
  OnError on_error_;
  Identity seen_;
  bool stopped_ = false;
};

// One endpoint's host:port, looked up.
struct Resolution {
  config::EndpointConfig config;
  std::optional<boost::asio::ip::tcp::endpoint> endpoint;  // none: not resolved
  std::string error;                                       // then why, for the log
};

// How long the lookups of one change of the endpoint set may take; those
// still pending then count as not resolved.
inline constexpr std::chrono::seconds kResolveTimeout{5};

// Resolves each endpoint's host without blocking `ioc`'s thread (the data
// layer's: its scrapes go on meanwhile) and calls `done` there with one
// Resolution per endpoint, in order, once every lookup has finished or
// `timeout` has passed. An IP address needs no lookup: when no endpoint has a
// host name, `done` runs before this returns. Asio runs getaddrinfo on one
// helper thread per context and cannot interrupt it: after a timeout, a hung
// lookup still holds that thread (and the context's run()) until it returns.
void resolve_endpoints(boost::asio::io_context& ioc, std::vector<config::EndpointConfig> endpoints,
                       std::chrono::nanoseconds timeout,
                       std::function<void(std::vector<Resolution>)> done);

}  // namespace sluice::datalayer
