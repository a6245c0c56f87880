// Identity at runtime: the key file (watched on the data layer's thread),
// and the authenticator built from the config's auth:/tenants: and the
// keys, handed to every I/O thread whenever either changes.
#include "app/gateway.h"
#include "auth/api_keys.h"
#include "observe/log.h"

namespace sluice::app {

void Gateway::start_identity() {
  set_identity_config(ctx_.config);
  const auto& keys = ctx_.config.auth.api_keys;
  if (keys.file.empty()) return;
  key_watcher_ = std::make_unique<datalayer::FileWatcher>(
      scraper_->context(), keys.file, keys.poll_interval, "keys",
      [this](const std::string& path) { apply_key_file(path); },
      [](const std::string& message) { SLUICE_LOG(kWarn, "auth", message); });
  key_watcher_->load_now();  // throws ConfigError: startup fails
}

// Throws ConfigError: the keys in use stay.
void Gateway::apply_key_file(const std::string& path) {
  std::vector<auth::KeyRecord> records;
  std::string error;
  if (!auth::parse_key_file(config::read_regular_file(path), records, error))
    throw config::ConfigError(path + ": " + error);
  auto store = std::make_shared<const auth::KeyStore>(std::move(records));
  SLUICE_LOG(kInfo, "auth", path << ": " << store->size() << " API key(s)");
  {
    std::lock_guard lock(identity_mu_);
    keys_ = std::move(store);
  }
  publish_authenticator();
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
void Gateway::publish_authenticator() {
  std::lock_guard lock(identity_mu_);
  auto a = std::make_shared<const auth::Authenticator>(*identity_config_, keys_);
  data_.set_authenticator(std::move(a), [] {});
}

}  // namespace sluice::app
