// The admin API's key changes (admin/keys.cc), made on the key writer's
// thread one at a time (app/key_writer.h), never on the admin thread: in a
// fleet the records are held here and replicated through Redis as admin
// changes; without one they are written into the key file.
//
// A change the key file could not hold is refused before anything is
// written (issue 39, item 3): every record passes auth::check_key_record
// (the key file reader's own check, which every replica makes too), no two
// records share a hash, the file stays within its size limit, and the
// rendered file is read back before it is written beside the old one and
// renamed over it. A refused change leaves the file byte for byte.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "app/gateway.h"
#include "auth/api_keys.h"
#include "observe/log.h"

namespace sluice::app {

namespace {

admin::KeyWriteResult unavailable(std::string why) {
  return {409, "key-store-unavailable", std::move(why)};
}

admin::KeyWriteResult duplicate_hash(const auth::KeyRecord& r, const std::string& other) {
  return {400, "duplicate-sha256",
          "key '" + other + "' has this sha256 already: each key's hash is unique, and '" + r.id +
              "' would make a key file that does not load"};
}

// Written whole to `tmp` and synced; "" or why not.
std::string write_whole(const std::string& tmp, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return tmp + ": " + std::strerror(errno);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  const bool ok = written == text.size() && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  return ok ? "" : tmp + ": " + std::strerror(err ? err : EIO);
}

}  // namespace

void Gateway::submit_key_change(std::function<void()> change,
                                const std::function<void(admin::KeyWriteResult)>& refused) {
  if (!key_writer_->submit(std::move(change)))
    refused({503, "key-writes-busy",
             std::to_string(ctx_.config.auth.api_keys.max_pending_writes) +
                 " key changes are waiting already (auth.apiKeys.maxPendingWrites): try again"});
}

void Gateway::put_key(const auth::KeyRecord& r, std::function<void(admin::KeyWriteResult)> done) {
  if (auto bad = auth::check_key_record(r)) return done({400, bad.code, bad.message});
  if (!fleet_ && ctx_.config.auth.api_keys.file.empty())
    return done(
        unavailable("no key store: set auth.apiKeys.file (or redis: for a fleet) to make keys"));
  submit_key_change(
      [this, r, done] {
        if (fleet_) return put_fleet_key(r, done);
        put_file_key(r, done);
      },
      done);
}

void Gateway::put_fleet_key(const auth::KeyRecord& r,
                            std::function<void(admin::KeyWriteResult)> done) {
  {
    std::lock_guard lock(identity_mu_);
    for (const auto& [id, k] : keys_.admin)
      if (id != r.id && k.hash == r.hash) return done(duplicate_hash(r, id));
    for (const auto& k : keys_.file)
      if (k.id != r.id && k.hash == r.hash) return done(duplicate_hash(r, k.id));
    keys_.admin[r.id] = r;
  }
  publish_authenticator([done = std::move(done)] { done({}); });
}

void Gateway::put_file_key(const auth::KeyRecord& r,
                           std::function<void(admin::KeyWriteResult)> done) {
  std::vector<auth::KeyRecord> records;
  {
    std::lock_guard lock(identity_mu_);
    records = keys_.file;
  }
  auto same_id = records.end();
  for (auto it = records.begin(); it != records.end(); ++it) {
    if (it->id == r.id)
      same_id = it;
    else if (it->hash == r.hash)
      return done(duplicate_hash(r, it->id));
  }
  if (same_id != records.end())
    *same_id = r;
  else
    records.push_back(r);
  auto result = write_key_file(std::move(records), [done] { done({}); });
  if (!result.ok()) done(std::move(result));
}

admin::KeyWriteResult Gateway::write_key_file(std::vector<auth::KeyRecord> records,
                                              std::function<void()> done) {
  const std::string& path = ctx_.config.auth.api_keys.file;
  const std::string text = auth::render_key_file(records);
  if (text.size() > config::kMaxFileBytes)
    return {400, "key-file-full",
            "the key file would be " + std::to_string(text.size()) + " bytes, past its limit of " +
                std::to_string(config::kMaxFileBytes >> 20) + " MiB: revoke keys first"};
  std::vector<auth::KeyRecord> back;
  std::string error;
  if (!auth::parse_key_file(text, back, error))
    return {400, "invalid-key-record", "the key file would not load: " + error};
  const std::string tmp = path + ".sluice-tmp";
  if (auto e = write_whole(tmp, text); !e.empty()) {
    ::unlink(tmp.c_str());
    return unavailable("cannot write the key file (" + e + ")");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return unavailable("cannot write the key file " + path + " (" + std::strerror(err) + ")");
  }
  // At once, not at the watcher's next look (which reads the same).
  SLUICE_LOG(kInfo, "auth", path << ": " << back.size() << " API key(s)");
  {
    std::lock_guard lock(identity_mu_);
    keys_.written = auth::sha256(text);  // the watcher's next look need not parse it
  }
  set_file_keys(std::move(back));
  publish_authenticator(std::move(done));
  return {};
}

void Gateway::delete_key(const std::string& id,
                         std::function<void(bool, admin::KeyWriteResult)> done) {
  if (!fleet_ && ctx_.config.auth.api_keys.file.empty()) return done(false, {});
  submit_key_change(
      [this, id, done] {
        if (!fleet_) return delete_file_key(id, done);
        {
          std::lock_guard lock(identity_mu_);
          if (keys_.admin.erase(id) == 0) return done(false, {});
        }
        publish_authenticator([done] { done(true, {}); });
      },
      [done](admin::KeyWriteResult busy) { done(false, std::move(busy)); });
}

void Gateway::delete_file_key(const std::string& id,
                              std::function<void(bool, admin::KeyWriteResult)> done) {
  std::vector<auth::KeyRecord> records;
  {
    std::lock_guard lock(identity_mu_);
    records = keys_.file;
  }
  auto it = std::find_if(records.begin(), records.end(), [&](const auto& k) { return k.id == id; });
  if (it == records.end()) return done(false, {});
  records.erase(it);
  auto result = write_key_file(std::move(records), [done] { done(true, {}); });
  if (!result.ok()) done(false, std::move(result));
}

}  // namespace sluice::app
