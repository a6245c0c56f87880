// Identity at runtime: the key file (watched on the data layer's thread),
// the keys made through the admin API (written into the key file; in a
// fleet, held here and replicated through Redis as admin changes), and the
// authenticator built from the config's auth:/tenants: and the keys,
// handed to every I/O thread whenever any of them changes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

#include "app/gateway.h"
#include "auth/api_keys.h"
#include "observe/log.h"

namespace sluice::app {

namespace net = boost::asio;

void Gateway::start_identity() {
  set_identity_config(ctx_.config);
  start_jwks();
  if (ctx_.config.auth.enabled)
    catalog_ = std::make_unique<datalayer::ModelCatalogPoller>(
        scraper_->context(), std::chrono::seconds(10),
        [this](std::shared_ptr<const datalayer::ModelCatalog> c) {
          ctx_.models.store(std::move(c));
        });
  if (catalog_) {
    std::vector<std::string> serving;
    for (std::size_t i = 0; i < ctx_.endpoints.size(); ++i)
      if (!ctx_.endpoints.at(i).removed.load())
        serving.push_back(ctx_.endpoints.at(i).config.address);
    catalog_->set_endpoints(std::move(serving));
    catalog_->set_upstream(ctx_.policy->upstream_tls, ctx_.policy->credentials);
  }
  const auto& keys = ctx_.config.auth.api_keys;
  if (keys.file.empty()) return;
  key_watcher_ = std::make_unique<datalayer::FileWatcher>(
      scraper_->context(), keys.file, keys.poll_interval, "keys",
      [this](const std::string& path) {
        // Counted once every I/O thread holds the keys; a ConfigError
        // (the keys in use stay) is counted by the error callback.
        apply_key_file(path,
                       [this] { ctx_.key_file_loads.fetch_add(1, std::memory_order_relaxed); });
      },
      [this](const std::string& message) {
        ctx_.key_file_load_failures.fetch_add(1, std::memory_order_relaxed);
        SLUICE_LOG(kWarn, "auth", message);
      });
  key_watcher_->load_now();  // throws ConfigError: startup fails
}

// The JWKS: read now from a file (startup fails without it), or fetched
// from its URL in the background; a JWT with an unknown kid asks again.
void Gateway::start_jwks() {
  if (!ctx_.config.auth.jwt.enabled) return;
  jwks_source_ = std::make_unique<JwksSource>(
      scraper_->context(), ctx_.config.auth.jwt,
      [this](std::shared_ptr<const auth::Jwks> keys) {
        {
          std::lock_guard lock(identity_mu_);
          jwks_ = std::move(keys);
        }
        // Counted once every I/O thread verifies with them (and has
        // forgotten the tokens it verified with the old ones).
        publish_authenticator([this] { ctx_.jwks_loads.fetch_add(1, std::memory_order_relaxed); });
      },
      [this] { ctx_.jwks_refetch_wanted.store(false, std::memory_order_release); });
  ctx_.on_jwks_refetch = [this] {
    net::post(scraper_->context(), [this] { jwks_source_->refetch(); });
  };
  jwks_source_->start();
}

// Throws ConfigError: the keys in use stay.
void Gateway::apply_key_file(const std::string& path, std::function<void()> done) {
  std::vector<auth::KeyRecord> records;
  std::string error;
  if (!auth::parse_key_file(config::read_regular_file(path), records, error))
    throw config::ConfigError(path + ": " + error);
  SLUICE_LOG(kInfo, "auth", path << ": " << records.size() << " API key(s)");
  {
    std::lock_guard lock(identity_mu_);
    file_keys_ = std::move(records);
  }
  publish_authenticator(std::move(done));
}

void Gateway::set_identity_config(const config::Config& c) {
  {
    std::lock_guard lock(identity_mu_);
    identity_config_ = std::make_shared<const config::Config>(c);
  }
  publish_authenticator();
}

// Built and handed out under the lock, so two changes reach every thread
// in the order they were made (each thread's queue is first in, first out).
// The admin API's records come first: one of them replaces a file key of
// the same id.
void Gateway::publish_authenticator(std::function<void()> done) {
  std::lock_guard lock(identity_mu_);
  std::vector<auth::KeyRecord> all;
  all.reserve(admin_keys_.size() + file_keys_.size());
  for (const auto& [_, r] : admin_keys_) all.push_back(r);
  all.insert(all.end(), file_keys_.begin(), file_keys_.end());
  auto store = std::make_shared<const auth::KeyStore>(std::move(all));
  data_.set_authenticator(
      std::make_shared<const auth::Authenticator>(*identity_config_, store, jwks_),
      std::move(done));
}

std::vector<admin::KeyEntry> Gateway::keys() {
  std::lock_guard lock(identity_mu_);
  std::vector<admin::KeyEntry> out;
  for (const auto& [_, r] : admin_keys_) out.push_back({r, false});
  for (const auto& r : file_keys_)
    if (!admin_keys_.count(r.id)) out.push_back({r, true});
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.record.id < b.record.id; });
  return out;
}

// Written whole to a file beside it, then renamed over it: a reader (this
// process's watcher, another replica's) sees the old file or the new one.
std::string Gateway::write_key_file(std::vector<auth::KeyRecord> records,
                                    std::function<void()> done) {
  const std::string& path = ctx_.config.auth.api_keys.file;
  const std::string tmp = path + ".sluice-tmp";
  const std::string text = auth::render_key_file(records);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot write the key file (" + tmp + ": " + std::strerror(errno) + ")";
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  const bool ok = written == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return "cannot write the key file " + path + " (" + std::strerror(errno) + ")";
  }
  try {
    apply_key_file(path, std::move(done));  // at once, not at the watcher's next look
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

void Gateway::put_key(const auth::KeyRecord& r, std::function<void(std::string)> done) {
  if (fleet_) {
    {
      std::lock_guard lock(identity_mu_);
      admin_keys_[r.id] = r;
    }
    return publish_authenticator([done = std::move(done)] { done(""); });
  }
  if (ctx_.config.auth.api_keys.file.empty())
    return done("no key store: set auth.apiKeys.file (or redis: for a fleet) to make keys");
  std::vector<auth::KeyRecord> records;
  {
    std::lock_guard lock(identity_mu_);
    records = file_keys_;
  }
  auto it =
      std::find_if(records.begin(), records.end(), [&](const auto& k) { return k.id == r.id; });
  if (it != records.end())
    *it = r;
  else
    records.push_back(r);
  auto shared = std::make_shared<std::function<void(std::string)>>(std::move(done));
  auto error = write_key_file(std::move(records), [shared] { (*shared)(""); });
  if (!error.empty()) (*shared)(error);
}

void Gateway::delete_key(const std::string& id, std::function<void(bool, std::string)> done) {
  if (fleet_) {
    {
      std::lock_guard lock(identity_mu_);
      if (admin_keys_.erase(id) == 0) return done(false, "");
    }
    return publish_authenticator([done = std::move(done)] { done(true, ""); });
  }
  std::vector<auth::KeyRecord> records;
  {
    std::lock_guard lock(identity_mu_);
    records = file_keys_;
  }
  auto it = std::find_if(records.begin(), records.end(), [&](const auto& k) { return k.id == id; });
  if (it == records.end()) return done(false, "");
  records.erase(it);
  auto shared = std::make_shared<std::function<void(bool, std::string)>>(std::move(done));
  auto error = write_key_file(std::move(records), [shared] { (*shared)(true, ""); });
  if (!error.empty()) (*shared)(false, error);
}

}  // namespace sluice::app
