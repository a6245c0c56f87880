#include "datalayer/endpoints_watcher.h"

#include <sys/stat.h>

#include <memory>

namespace sluice::datalayer {

FileWatcher::FileWatcher(boost::asio::io_context& ioc, std::string path,
                         std::chrono::nanoseconds interval, std::string what, OnChange on_change,
                         OnError on_error)
    : timer_(ioc),
      path_(std::move(path)),
      interval_(interval),
      what_(std::move(what)),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)) {}

FileWatcher::Identity FileWatcher::identity() const {
  struct stat st {};
  Identity id;
  if (::stat(path_.c_str(), &st) != 0) return id;
  id.exists = true;
  id.inode = st.st_ino;
  id.size = static_cast<unsigned long long>(st.st_size);
  id.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return id;
}

void FileWatcher::load_now() {
  seen_ = identity();
  on_change_(path_);
}

void FileWatcher::start() { arm(); }

void FileWatcher::stop() {
  stopped_ = true;
  timer_.cancel();
}

void FileWatcher::arm() {
  if (stopped_) return;
  timer_.expires_after(interval_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec && !stopped_) poll();
  });
}

void FileWatcher::poll() {
  const Identity now = identity();
  if (!(now == seen_)) {
    seen_ = now;
    if (!now.exists) {
      on_error_(path_ + ": cannot open file; keeping the current " + what_);
    } else {
      try {
        on_change_(path_);
      } catch (const config::ConfigError& e) {
        on_error_(std::string(e.what()) + "; keeping the current " + what_);
      }
    }
  }
  arm();
}

namespace {

// The lookups of one call to resolve_endpoints, shared by their handlers and
// the timer's: whichever comes last (or the timer) finishes it, once.
struct Lookups {
  Lookups(boost::asio::io_context& ioc, std::function<void(std::vector<Resolution>)> d)
      : resolver(ioc), timer(ioc), done(std::move(d)) {}
  boost::asio::ip::tcp::resolver resolver;
  boost::asio::steady_timer timer;
  std::vector<Resolution> results;
  std::size_t pending = 0;
  bool finished = false;
  std::function<void(std::vector<Resolution>)> done;

  void finish() {
    if (finished) return;
    finished = true;
    timer.cancel();
    resolver.cancel();  // lookups not started yet end at once
    for (auto& r : results)
      if (!r.endpoint && r.error.empty()) r.error = "no answer in time";
    auto callback = std::move(done);
    callback(std::move(results));
  }
};

}  // namespace

void resolve_endpoints(boost::asio::io_context& ioc, std::vector<config::EndpointConfig> endpoints,
                       std::chrono::nanoseconds timeout,
                       std::function<void(std::vector<Resolution>)> done) {
  namespace net = boost::asio;
  using tcp = net::ip::tcp;
  auto lookups = std::make_shared<Lookups>(ioc, std::move(done));
  std::vector<std::size_t> names;
  for (auto& c : endpoints) {
    Resolution r;
    r.config = std::move(c);
    boost::system::error_code ec;
    const auto address = net::ip::make_address(r.config.host, ec);
    if (!ec)
      r.endpoint = tcp::endpoint(address, r.config.port);
    else
      names.push_back(lookups->results.size());
    lookups->results.push_back(std::move(r));
  }
  if (names.empty()) return lookups->finish();
  lookups->pending = names.size();
  for (const std::size_t i : names) {
    const auto& c = lookups->results[i].config;
    lookups->resolver.async_resolve(
        c.host, std::to_string(c.port),
        [lookups, i](boost::system::error_code ec, tcp::resolver::results_type found) {
          if (lookups->finished) return;  // timed out: this answer came too late
          auto& r = lookups->results[i];
          if (!ec && !found.empty())
            r.endpoint = found.begin()->endpoint();
          else
            r.error = ec ? ec.message() : "no address";
          if (--lookups->pending == 0) lookups->finish();
        });
  }
  lookups->timer.expires_after(timeout);
  lookups->timer.async_wait([lookups](boost::system::error_code ec) {
    if (!ec) lookups->finish();
  });
}

}  // namespace sluice::datalayer
