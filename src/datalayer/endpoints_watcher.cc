#include "datalayer/endpoints_watcher.h"

#include <sys/stat.h>

namespace sluice::datalayer {

EndpointsWatcher::EndpointsWatcher(boost::asio::io_context& ioc, std::string path,
                                   std::chrono::nanoseconds interval, OnChange on_change,
                                   OnError on_error)
    : timer_(ioc),
      path_(std::move(path)),
      interval_(interval),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)) {}

EndpointsWatcher::Identity EndpointsWatcher::identity() const {
  struct stat st {};
  Identity id;
  if (::stat(path_.c_str(), &st) != 0) return id;
  id.exists = true;
  id.inode = st.st_ino;
  id.size = static_cast<unsigned long long>(st.st_size);
  id.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return id;
}

std::vector<config::EndpointConfig> EndpointsWatcher::load_now() {
  seen_ = identity();
  return config::load_endpoints_file(path_);
}

void EndpointsWatcher::start() { arm(); }

void EndpointsWatcher::stop() {
  stopped_ = true;
  timer_.cancel();
}

void EndpointsWatcher::arm() {
  if (stopped_) return;
  timer_.expires_after(interval_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec && !stopped_) poll();
  });
}

void EndpointsWatcher::poll() {
  const Identity now = identity();
  if (!(now == seen_)) {
    seen_ = now;
    if (!now.exists) {
      on_error_(path_ + ": cannot open file; keeping the current endpoints");
    } else {
      try {
        on_change_(config::load_endpoints_file(path_));
      } catch (const config::ConfigError& e) {
        on_error_(std::string(e.what()) + "; keeping the current endpoints");
      }
    }
  }
  arm();
}

}  // namespace sluice::datalayer
