// What the data plane calls for quotas (issue 41): one config's limits
// (QuotaPolicy, immutable, swapped by a reload) over one Ledger that
// outlives reloads, so spend is kept across them by limit name.
//
// Owners in the ledger: "t:<tenant>" for each listed tenant (set at
// configure), for a tenant the "*" entry covers (set at its first request,
// bounded by the ledger's max_owners), and "k:<key id>" for each key with
// its own limits (set_key, by the app when its key store changes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quota/ledger.h"

namespace sluice::quota {

enum class HeadersMode : std::uint8_t { kAlways, kRefused, kNever };

struct QuotaPolicy {
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::vector<LimitDef>, Hash, std::equal_to<>> tenants;
  bool has_default = false;  // the "*" entry
  std::vector<LimitDef> default_limits;
  // model pattern (exact, "prefix*", "*") -> price; exact first, then the
  // longest prefix.
  std::vector<std::pair<std::string, Price>> prices;
  std::uint64_t default_output_tokens = 4096;
  HeadersMode headers = HeadersMode::kAlways;
  bool empty() const { return tenants.empty() && !has_default; }
  Price price_of(std::string_view model) const;
};

class Quotas {
 public:
  explicit Quotas(Ledger::Clock clock, std::size_t max_owners = 100'000)
      : ledger_(clock, max_owners) {}

  // A config's limits (null: none): every listed tenant's set (spend kept
  // by name), those "*" covers redefined; tenants no longer listed, nor
  // covered by "*", forgotten. A tenant "*" covers that is first seen
  // after this gets this policy's "*" limits, whatever policy the I/O
  // thread that saw it still holds. Returns the owners it could not set
  // (more limits than an owner may have: the config refuses them).
  std::size_t configure(std::shared_ptr<const QuotaPolicy> policy);
  std::size_t configure(const QuotaPolicy& policy) {
    return configure(std::make_shared<const QuotaPolicy>(policy));
  }
  // A key's own limits (empty: none).
  void set_key(std::string_view key_id, const std::vector<LimitDef>& defs);
  // Every key's own limits: the listed keys' set, every other key's
  // forgotten; a key listed twice has its first entry's. Returns the keys
  // it could not set.
  std::size_t set_keys(const std::vector<std::pair<std::string, std::vector<LimitDef>>>& keys);

  struct Admit {
    Ledger::Admit admit;
    bool limited = false;      // some limit applied (else: nothing held, no headers)
    bool owners_full = false;  // the ledger had no room for this tenant
  };
  // Reserves `worst` of `model` for `tenant` (and `key_id`, "" none)
  // under `policy` (the one last configured). `scratch` is the caller's
  // buffer for owner names (its capacity reused: no allocation per request).
  Admit reserve(const QuotaPolicy& policy, std::string_view tenant, std::string_view key_id,
                std::string_view model, const Usage& worst, Millis now, std::string& scratch);

  Ledger& ledger() { return ledger_; }

  // For operators: each owner's limits as they stand, tenants ("t:") then
  // keys ("k:"), by name; `tenant` non-empty: that tenant's only (and no
  // keys). At most `max` limits.
  struct Row {
    bool key = false;
    std::string id;  // the tenant, or the key's id
    LimitDef def;
    Limit::Snapshot now;
  };
  std::vector<Row> rows(std::string_view tenant, Millis now, std::size_t max) const;
  // Resets a tenant's limits (not its keys'); false if it has none.
  // `fleet_books`: in a fleet, the fleet's spend of them goes too (the
  // operator's reset, made here); else this replica's own (another
  // replica's reset, sent on).
  bool reset_tenant(std::string_view tenant, bool fleet_books = true);

  std::shared_ptr<const QuotaPolicy> current() const;

 private:
  Ledger ledger_;
  mutable std::mutex mu_;  // current_ only
  std::shared_ptr<const QuotaPolicy> current_;
};

}  // namespace sluice::quota
