#include "app/jwks_source.h"

#include "datalayer/http_fetch.h"
#include "observe/log.h"

namespace sluice::app {

JwksSource::JwksSource(boost::asio::io_context& ioc, const config::JwtSpec& spec, OnKeys on_keys,
                       std::function<void()> taken)
    : ioc_(ioc),
      spec_(spec),
      on_keys_(std::move(on_keys)),
      taken_(std::move(taken)),
      refresh_(ioc),
      refetch_(ioc) {}

JwksSource::~JwksSource() = default;

void JwksSource::start() {
  if (!spec_.jwks_file.empty()) {
    watcher_ = std::make_unique<datalayer::FileWatcher>(
        ioc_, spec_.jwks_file, std::chrono::seconds(1), "JWKS",
        [this](const std::string& path) { load_file(path); },
        [](const std::string& message) { SLUICE_LOG(kWarn, "auth", message); });
    watcher_->load_now();  // throws ConfigError: startup fails
    last_fetch_ = std::chrono::steady_clock::now();
    watcher_->start();
    return;
  }
  fetch();
}

void JwksSource::stop() {
  stopped_ = true;
  if (watcher_) watcher_->stop();
  refresh_.cancel();
  refetch_.cancel();
}

// Throws ConfigError: the keys in use stay.
void JwksSource::load_file(const std::string& path) {
  ++fetches_;
  const std::string text = config::read_regular_file(path);
  std::string error;
  std::vector<std::string> skipped;
  auto keys = auth::Jwks::parse(text, error, &skipped);
  if (!keys) throw config::ConfigError(path + ": " + error);
  for (const auto& s : skipped) SLUICE_LOG(kWarn, "auth", path << ": key skipped: " << s);
  SLUICE_LOG(kInfo, "auth", path << ": " << keys->size() << " JWT signing key(s)");
  on_keys_(std::move(keys));
}

void JwksSource::refetch() {
  taken_();
  if (stopped_ || refetch_pending_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto next = last_fetch_ + spec_.jwks_min_refetch_interval;
  if (now >= next) return fetch();
  refetch_pending_ = true;
  refetch_.expires_at(next);
  refetch_.async_wait([this](boost::system::error_code ec) {
    refetch_pending_ = false;
    if (!ec && !stopped_) fetch();
  });
}

void JwksSource::fetch() {
  last_fetch_ = std::chrono::steady_clock::now();
  if (watcher_) {
    try {
      load_file(spec_.jwks_file);
    } catch (const config::ConfigError& e) {
      SLUICE_LOG(kWarn, "auth", e.what() << "; keeping the JWT keys in use");
    }
    return;
  }
  if (fetching_) return;
  fetching_ = true;
  refresh_.cancel();
  datalayer::FetchOptions o;
  o.max_body_bytes = auth::kMaxJwksBytes;
  o.ca_file = spec_.jwks_ca_file;
  datalayer::http_get(ioc_, spec_.jwks_url, o, [this](datalayer::FetchResult r) {
    fetching_ = false;
    ++fetches_;
    if (stopped_) return;
    if (!r.ok) {
      SLUICE_LOG_LIMITED(kWarn, "auth",
                         spec_.jwks_url << ": " << r.error << "; keeping the JWT keys in use");
    } else {
      std::string error;
      std::vector<std::string> skipped;
      auto keys = auth::Jwks::parse(r.body, error, &skipped);
      if (!keys) {
        SLUICE_LOG_LIMITED(kWarn, "auth",
                           spec_.jwks_url << ": " << error << "; keeping the JWT keys in use");
      } else {
        for (const auto& s : skipped)
          SLUICE_LOG_LIMITED(kWarn, "auth", spec_.jwks_url << ": key skipped: " << s);
        if (!loaded_once_)
          SLUICE_LOG(kInfo, "auth",
                     spec_.jwks_url << ": " << keys->size() << " JWT signing key(s)");
        loaded_once_ = true;
        on_keys_(std::move(keys));
      }
    }
    arm_refresh();
  });
}

void JwksSource::arm_refresh() {
  if (stopped_) return;
  refresh_.expires_after(spec_.jwks_refresh_interval);
  refresh_.async_wait([this](boost::system::error_code ec) {
    if (!ec && !stopped_) fetch();
  });
}

}  // namespace sluice::app
