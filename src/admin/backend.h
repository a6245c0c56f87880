// What the admin plane needs from the process that hosts it, and nothing
// more: the data plane's shared context, the fleet (if any), a reload and
// the I/O threads' statistics. The composition root (app/gateway.h)
// implements it; the admin plane never sees how.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "auth/api_keys.h"
#include "config/config.h"
#include "observe/request_stats.h"

namespace sluice::fleet {
class FleetSync;
}  // namespace sluice::fleet

namespace sluice::proxy {
struct ProxyContext;
}  // namespace sluice::proxy

namespace sluice::admin {

// An API key record as the admin plane sees it: where it came from too.
struct KeyEntry {
  auth::KeyRecord record;
  bool from_file = false;  // auth.apiKeys.file (else made through the admin API)
};

// What a key change came to: done (status 0), or refused with the HTTP
// status and typed code the admin API answers (then nothing changed).
struct KeyWriteResult {
  int status = 0;
  std::string code;
  std::string message;
  bool ok() const { return status == 0; }
};

// What a reload did.
struct ReloadResult {
  bool ok = false;
  std::string error;                        // !ok: why nothing changed
  std::vector<std::string> applied;         // sections applied in place
  std::vector<std::string> restart_needed;  // changed, but only a restart applies them
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual proxy::ProxyContext& context() = 0;
  // The fleet's sync thread (redis:); null without one.
  virtual fleet::FleetSync* fleet() = 0;
  // Re-reads the config file and applies what it changed in place (see
  // app::Gateway::reload). `done` runs exactly once, on any thread.
  virtual void reload(std::function<void(ReloadResult)> done) = 0;
  // Every I/O thread's request statistics, merged; `done` on any thread.
  virtual void collect_stats(std::function<void(observe::ThreadStats)> done) = 0;
  // The API keys in use (sorted by id).
  virtual std::vector<KeyEntry> keys() = 0;
  // The record of `id`, if any; costs no more with more keys.
  virtual std::optional<KeyEntry> find_key(const std::string& id) = 0;
  // Adds or replaces the record of `r.id` (made through the admin API);
  // `done` once every I/O thread checks new requests against it, or with
  // why not (then nothing changed, the key file byte for byte). Called on
  // any thread, never waits for the write: `done` runs on the writer's
  // thread, or on the caller's when the change is refused at once.
  virtual void put_key(const auth::KeyRecord& r, std::function<void(KeyWriteResult)> done) = 0;
  // The quotas of `tenant`'s policy in the config in use (its own
  // tenants[] entry, else "*"'s; empty: none): a key's own are checked
  // against them when made or changed through the admin API.
  virtual std::vector<config::QuotaLimitSpec> tenant_quotas(const std::string& tenant) = 0;
  // Removes `id`'s record; `done(found, result)` once every I/O thread
  // refuses it (found false: no such key this plane may remove).
  virtual void delete_key(const std::string& id,
                          std::function<void(bool, KeyWriteResult)> done) = 0;
};

}  // namespace sluice::admin
