// Identity at runtime: the key file (watched on the data layer's thread),
// the keys made through the admin API (key_changes.cc), and the
// authenticator built from the config's auth:/tenants: and the keys,
// handed to every I/O thread whenever any of them changes.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <utility>

#include "app/gateway.h"
#include "auth/api_keys.h"
#include "observe/log.h"
#include "proxy/quota_policy.h"

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
  const char* gate = std::getenv("SLUICE_TEST_KEY_WRITE_GATE");  // tests only (testing.md)
  key_writer_ = std::make_unique<KeyWriter>(keys.max_pending_writes, ctx_.key_writes_pending,
                                            ctx_.key_writes_refused, gate ? gate : "");
  if (keys.file.empty()) return;
  key_watcher_ = std::make_unique<datalayer::FileWatcher>(
      scraper_->context(), keys.file, keys.poll_interval, "keys",
      [this, loaded = false](const std::string& path) mutable {
        // At startup read here (a bad file fails the start); afterwards on
        // the key writer's thread, in order with the admin API's writes.
        // Counted once every I/O thread holds the keys; a refused file
        // (the keys in use stay) by the error callback or the writer.
        if (!std::exchange(loaded, true)) return apply_key_file(path, key_file_loaded());
        key_writer_->reload([this, path] { reload_key_file(path); });
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
  apply_key_text(path, config::read_regular_file(path), std::move(done));
}

void Gateway::apply_key_text(const std::string& path, const std::string& text,
                             std::function<void()> done) {
  std::vector<auth::KeyRecord> records;
  std::string error;
  if (!auth::parse_key_file(text, records, error)) throw config::ConfigError(path + ": " + error);
  SLUICE_LOG(kInfo, "auth", path << ": " << records.size() << " API key(s)");
  set_file_keys(std::move(records));
  publish_authenticator(std::move(done));
}

// On the key writer's thread: a bad file keeps the keys in use; the file
// as this process last wrote it is in use already (not parsed again).
void Gateway::reload_key_file(const std::string& path) {
  try {
    const std::string text = config::read_regular_file(path);
    const auth::Digest digest = auth::sha256(text);
    {
      std::lock_guard lock(identity_mu_);
      if (digest == keys_.written) return key_file_loaded()();
    }
    apply_key_text(path, text, key_file_loaded());
  } catch (const std::exception& e) {
    ctx_.key_file_load_failures.fetch_add(1, std::memory_order_relaxed);
    SLUICE_LOG(kWarn, "auth", e.what() << "; keeping the current keys");
  }
}

std::function<void()> Gateway::key_file_loaded() {
  return [this] { ctx_.key_file_loads.fetch_add(1, std::memory_order_relaxed); };
}

void Gateway::set_file_keys(std::vector<auth::KeyRecord> records) {
  std::unordered_map<std::string, std::size_t> ids;
  ids.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) ids.emplace(records[i].id, i);
  std::lock_guard lock(identity_mu_);
  keys_.file = std::move(records);
  keys_.file_ids = std::move(ids);
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
  all.reserve(keys_.admin.size() + keys_.file.size());
  for (const auto& [_, r] : keys_.admin) all.push_back(r);
  all.insert(all.end(), keys_.file.begin(), keys_.file.end());
  std::vector<std::pair<std::string, std::vector<quota::LimitDef>>> key_quotas;
  for (const auto& r : all)
    if (!r.quotas.empty()) key_quotas.emplace_back(r.id, proxy::limit_defs(r.quotas));
  if (const std::size_t failed = ctx_.quotas.set_keys(key_quotas))
    SLUICE_LOG(kError, "quota", failed << " key(s) with more limits than an owner may have");
  auto store = std::make_shared<const auth::KeyStore>(std::move(all));
  data_.set_authenticator(
      std::make_shared<const auth::Authenticator>(*identity_config_, store, jwks_),
      std::move(done));
}

std::vector<admin::KeyEntry> Gateway::keys() {
  std::lock_guard lock(identity_mu_);
  std::vector<admin::KeyEntry> out;
  for (const auto& [_, r] : keys_.admin) out.push_back({r, false});
  for (const auto& r : keys_.file)
    if (!keys_.admin.count(r.id)) out.push_back({r, true});
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.record.id < b.record.id; });
  return out;
}

std::optional<admin::KeyEntry> Gateway::find_key(const std::string& id) {
  std::lock_guard lock(identity_mu_);
  if (auto it = keys_.admin.find(id); it != keys_.admin.end())
    return admin::KeyEntry{it->second, false};
  if (auto it = keys_.file_ids.find(id); it != keys_.file_ids.end())
    return admin::KeyEntry{keys_.file[it->second], true};
  return std::nullopt;
}

std::vector<config::QuotaLimitSpec> Gateway::tenant_quotas(const std::string& tenant) {
  std::lock_guard lock(identity_mu_);
  const config::TenantSpec* fallback = nullptr;
  for (const auto& t : identity_config_->tenants) {
    if (t.id == tenant) return t.quotas;
    if (t.id == "*") fallback = &t;
  }
  return fallback ? fallback->quotas : std::vector<config::QuotaLimitSpec>{};
}

}  // namespace sluice::app
