// API keys: each a record with an id, a tenant, an optional expiry and a
// disabled flag, stored only as the SHA-256 of the key (a key is 32 random
// bytes, so its hash needs no salt or stretching). A presented key costs one
// SHA-256 and one hash-table lookup; the found digest is compared again in
// constant time. The key itself is shown once, when it is made; after that
// only its id and its prefix (the first kPrefixChars) name it.
//
// The key file (auth.apiKeys.file), YAML:
//   keys:
//     - id: key_3f9a0c1d            # unique; [A-Za-z0-9_.-], 1..64
//       tenant: acme                # the tenant's id (its flow)
//       sha256: 9f86d08...          # 64 hex digits
//       prefix: sk-sluice-Ab3x      # optional, for people
//       expires: 2027-01-01T00:00:00Z  # optional: RFC 3339 UTC, or unix seconds
//       disabled: false             # optional
//       quotas:                     # optional: the key's own limits (config/quota_limit.h)
//         - {name: tpm, tokens: "20000", window: 1m, models: ["llama*"]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/crypto.h"
#include "config/config.h"

namespace sluice::auth {

inline constexpr std::string_view kKeyScheme = "sk-sluice-";
inline constexpr std::size_t kPrefixChars = 14;  // "sk-sluice-" and 4 characters
// Keys in one file or store at most.
inline constexpr std::size_t kMaxKeys = 100000;

struct KeyRecord {
  std::string id;
  std::string tenant;
  Digest hash{};
  std::string prefix;
  std::optional<std::int64_t> expires_at;  // unix seconds
  bool disabled = false;
  // The key's own scope, within its tenant's policy and never beyond it:
  // the models it may use (exact names or `prefix*`; empty: the tenant's),
  // the highest objective (""), a max_tokens ceiling (0: the tenant's).
  std::vector<std::string> models;
  std::string max_objective;
  std::uint64_t max_tokens = 0;
  // The key's own quotas (issue 41), charged beside its tenant's: a request
  // is never beyond either. Not enforced yet.
  std::vector<config::QuotaLimitSpec> quotas;
  bool scoped() const { return !models.empty() || !max_objective.empty() || max_tokens > 0; }
  bool operator==(const KeyRecord&) const = default;
};

enum class KeyCheck : std::uint8_t { kOk, kUnknown, kExpired, kDisabled };
std::string_view to_string(KeyCheck c);  // "ok", "unknown-key", "key-expired", "key-disabled"

struct DigestHash {
  std::size_t operator()(const Digest& d) const noexcept;
};

// An immutable set of keys, shared by the I/O threads.
class KeyStore {
 public:
  KeyStore() = default;
  // Records with a repeated id or hash: the later one is dropped (the
  // parser refuses them; the fleet's store may hold them transiently).
  explicit KeyStore(std::vector<KeyRecord> records);

  // The record of `presented` and whether it may be used at `now`.
  KeyCheck check(std::string_view presented, std::int64_t now_unix,
                 const KeyRecord** record) const noexcept;
  std::size_t size() const { return by_hash_.size(); }
  std::vector<KeyRecord> records() const;  // sorted by id
  const KeyRecord* find_id(std::string_view id) const;
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [hash, record] : by_hash_) f(record);
  }

 private:
  std::unordered_map<Digest, KeyRecord, DigestHash> by_hash_;
  std::unordered_map<std::string, const KeyRecord*> by_id_;
};

// A key id: 1 to 64 of [A-Za-z0-9_.-].
bool is_valid_key_id(std::string_view id);
// A key's scope: at most kMaxKeyModels model names of 1 to 256 visible
// characters, `*` only last; a max objective of steering bytes.
inline constexpr std::size_t kMaxKeyModels = 64;
inline constexpr std::uint64_t kMaxKeyMaxTokens = 1000000000;
bool is_valid_key_model(std::string_view model);
// The scope's fields, checked; "" if fine, else what is wrong.
std::string check_key_scope(const KeyRecord& r);
// The quotas' own syntax (each limit as its reader checks it, at most
// kMaxQuotaLimits, names unique); "" if fine, else "quotas[i].field: what".
// Whether a limit is within its tenant's is the admin API's check (the key
// file holds no tenant policy).
std::string check_key_quotas(const KeyRecord& r);

// The latest expiry the key file writes and reads back the same:
// 9999-12-31T23:59:59Z (its dates have four-digit years).
inline constexpr std::int64_t kMaxKeyExpiry = 253402300799;

// What is wrong with a record: `code` the admin API's typed answer
// ("invalid-id", "invalid-tenant", "invalid-sha256", "invalid-expires",
// "invalid-scope", "invalid-quota"), `message` for people. Empty code: nothing.
struct KeyRecordError {
  std::string code;
  std::string message;
  explicit operator bool() const { return !code.empty(); }
};
// The one check of a whole record, made by every reader of one: the key
// file's reader, POST and PUT of the admin API, and so every replica of a
// fleet applying another's PUT. A record it accepts is written to the key
// file and read back the same, on any replica.
KeyRecordError check_key_record(const KeyRecord& r);
// The key file's text into `out`; false with `error` ("line N: what") on
// anything malformed, a repeated id or hash, or more than kMaxKeys keys.
// Never throws.
bool parse_key_file(std::string_view text, std::vector<KeyRecord>& out, std::string& error);
// The records as a key file (what parse_key_file reads back the same).
std::string render_key_file(const std::vector<KeyRecord>& records);

// RFC 3339 UTC ("2027-01-01T00:00:00Z") or decimal unix seconds, from 0
// to kMaxKeyExpiry (nullopt past it: format_expiry could not write it).
std::optional<std::int64_t> parse_expiry(std::string_view text);
std::string format_expiry(std::int64_t unix_seconds);

// A new key for `tenant`: "sk-sluice-" + 43 base64url characters (32 bytes
// from the CSPRNG), and its record (id "key_" + 8 random hex digits when
// `id` is empty). nullopt if the CSPRNG failed.
struct NewKey {
  std::string key;
  KeyRecord record;
};
std::optional<NewKey> generate_key(std::string_view tenant, std::string_view id = {});

}  // namespace sluice::auth
