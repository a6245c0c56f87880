#include "auth/api_keys.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>

#include "config/quota_limit.h"
#include "protocol/steering.h"

namespace sluice::auth {

std::string_view to_string(KeyCheck c) {
  switch (c) {
    case KeyCheck::kOk:
      return "ok";
    case KeyCheck::kUnknown:
      return "unknown-key";
    case KeyCheck::kExpired:
      return "key-expired";
    case KeyCheck::kDisabled:
      return "key-disabled";
  }
  return "unknown-key";
}

std::size_t DigestHash::operator()(const Digest& d) const noexcept {
  // The digest is uniformly distributed already: its first 8 bytes will do.
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof h);
  return h;
}

KeyStore::KeyStore(std::vector<KeyRecord> records) {
  by_hash_.reserve(records.size());
  for (auto& r : records) {
    if (by_id_.count(r.id) || by_hash_.count(r.hash)) continue;
    auto [it, fresh] = by_hash_.emplace(r.hash, std::move(r));
    by_id_.emplace(it->second.id, &it->second);
  }
}

KeyCheck KeyStore::check(std::string_view presented, std::int64_t now_unix,
                         const KeyRecord** record) const noexcept {
  *record = nullptr;
  const Digest d = sha256(presented);
  auto it = by_hash_.find(d);
  // The table's own comparison already matched; compared again in constant
  // time so that no path depends on where two digests first differ.
  if (it == by_hash_.end() || !constant_time_equal(it->first, d)) return KeyCheck::kUnknown;
  *record = &it->second;
  if (it->second.disabled) return KeyCheck::kDisabled;
  if (it->second.expires_at && now_unix >= *it->second.expires_at) return KeyCheck::kExpired;
  return KeyCheck::kOk;
}

std::vector<KeyRecord> KeyStore::records() const {
  std::vector<KeyRecord> out;
  out.reserve(by_hash_.size());
  for (const auto& [_, r] : by_hash_) out.push_back(r);
  std::sort(out.begin(), out.end(),
            [](const KeyRecord& a, const KeyRecord& b) { return a.id < b.id; });
  return out;
}

const KeyRecord* KeyStore::find_id(std::string_view id) const {
  auto it = by_id_.find(std::string(id));
  return it == by_id_.end() ? nullptr : it->second;
}

bool is_valid_key_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool is_valid_key_model(std::string_view m) {
  if (m.empty() || m.size() > 256 || m == "*") return false;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const char c = m[i];
    if (c <= ' ' || c > '~' || c == '"' || c == '\\') return false;
    if (c == '*' && i + 1 != m.size()) return false;
  }
  return true;
}

std::string check_key_scope(const KeyRecord& r) {
  if (r.models.size() > kMaxKeyModels) return "models: at most 64";
  for (const auto& m : r.models)
    if (!is_valid_key_model(m))
      return "models: each 1 to 256 visible characters, no quote or backslash, '*' only last";
  if (!r.max_objective.empty() && !protocol::is_valid_steering_value(r.max_objective, 128))
    return "maxObjective: 1 to 128 token characters";
  if (r.max_tokens > kMaxKeyMaxTokens) return "maxTokens: at most 1000000000";
  return "";
}

KeyRecordError check_key_record(const KeyRecord& r) {
  if (!is_valid_key_id(r.id)) return {"invalid-id", "id: 1 to 64 of letters, digits, _ . -"};
  if (!protocol::is_valid_steering_value(r.tenant, 128) || r.tenant.find('/') != std::string::npos)
    return {"invalid-tenant", "tenant: 1 to 128 token characters without '/'"};
  if (r.hash == Digest{}) return {"invalid-sha256", "sha256 is required"};
  if (r.expires_at && (*r.expires_at < 0 || *r.expires_at > kMaxKeyExpiry))
    return {"invalid-expires",
            "expires: from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (unix seconds 0 to " +
                std::to_string(kMaxKeyExpiry) + ")"};
  if (auto bad = check_key_scope(r); !bad.empty()) return {"invalid-scope", bad};
  if (auto bad = check_key_quotas(r); !bad.empty()) return {"invalid-quota", bad};
  return {};
}

std::string check_key_quotas(const KeyRecord& r) {
  if (auto bad = config::check_quota_list(r.quotas)) return "quotas" + bad.field + ": " + bad.what;
  for (std::size_t i = 0; i < r.quotas.size(); ++i) {
    // Written out and read back: what the key file's reader would say.
    config::QuotaLimitDraft d;
    std::string bad;
    for (const auto& [k, v] : config::quota_limit_fields(r.quotas[i]))
      if (bad.empty() && !(bad = d.set(k, v)).empty()) bad = k + ": " + bad;
    for (const auto& m : r.quotas[i].models)
      if (bad.empty() && !(bad = d.add_model(m)).empty()) bad = "models: " + bad;
    config::QuotaLimitSpec back;
    if (auto e = d.finish(back); bad.empty() && e)
      bad = (e.field.empty() ? "" : e.field + ": ") + e.what;
    if (bad.empty() && !(back == r.quotas[i])) bad = "not a limit its reader writes back";
    if (!bad.empty()) return "quotas[" + std::to_string(i) + "]." + bad;
  }
  return "";
}

namespace {

bool digits_at(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_expiry(std::string_view s) {
  if (!s.empty() && s.size() <= 12 &&
      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t v = 0;
    for (char c : s) v = v * 10 + (c - '0');
    if (v > kMaxKeyExpiry) return std::nullopt;
    return v;
  }
  // YYYY-MM-DDTHH:MM:SSZ
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':' || (s[19] != 'Z' && s[19] != 'z'))
    return std::nullopt;
  int y, mo, d, h, mi, se;
  if (!digits_at(s, 0, 4, y) || !digits_at(s, 5, 2, mo) || !digits_at(s, 8, 2, d) ||
      !digits_at(s, 11, 2, h) || !digits_at(s, 14, 2, mi) || !digits_at(s, 17, 2, se))
    return std::nullopt;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  const std::time_t t = ::timegm(&tm);
  // timegm normalises 2027-02-31 into March: such a date is refused.
  std::tm back{};
  ::gmtime_r(&t, &back);
  if (back.tm_mday != d || back.tm_mon != mo - 1) return std::nullopt;
  return static_cast<std::int64_t>(t);
}

std::string format_expiry(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

std::string at_line(const YAML::Node& n) { return "line " + std::to_string(n.Mark().line + 1); }

// One limit of a key's quotas:, or an error naming its line.
bool read_limit(const YAML::Node& item, const std::string& path, config::QuotaLimitSpec& out,
                std::string& error) {
  if (!item.IsMap()) return error = at_line(item) + ": " + path + ": a mapping", false;
  config::QuotaLimitDraft d;
  for (const auto& kv : item) {
    const std::string k = kv.first.Scalar();
    const std::string field = path + "." + k;
    std::string bad;
    if (k == "models") {
      if (!kv.second.IsSequence())
        return error = at_line(kv.second) + ": " + field + ": a list of models", false;
      for (const auto& m : kv.second)
        if (bad.empty()) bad = m.IsScalar() ? d.add_model(m.Scalar()) : "names only";
    } else {
      bad = kv.second.IsScalar() ? d.set(k, kv.second.Scalar()) : "must be a plain value";
    }
    if (!bad.empty()) return error = at_line(kv.second) + ": " + field + ": " + bad, false;
  }
  if (auto bad = d.finish(out))
    return error = at_line(item) + ": " + path + (bad.field.empty() ? "" : "." + bad.field) + ": " +
                   bad.what,
           false;
  return true;
}

bool read_quotas(const YAML::Node& n, KeyRecord& r, std::string& error) {
  if (!n.IsSequence() || n.size() > config::kMaxQuotaLimits)
    return error = at_line(n) + ": quotas: a list of at most 16 limits", false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    config::QuotaLimitSpec l;
    if (!read_limit(n[i], "quotas[" + std::to_string(i) + "]", l, error)) return false;
    r.quotas.push_back(std::move(l));
  }
  return true;
}

// One entry of keys:, or an error naming its line.
bool read_record(const YAML::Node& item, KeyRecord& r, std::string& error) {
  if (!item.IsMap()) return error = at_line(item) + ": a key entry must be a mapping", false;
  for (const auto& kv : item) {
    const std::string k = kv.first.Scalar();
    if (k == "quotas") {
      if (!read_quotas(kv.second, r, error)) return false;
      continue;
    }
    if (k == "models") {
      if (!kv.second.IsSequence() || kv.second.size() > kMaxKeyModels)
        return error = at_line(kv.second) + ": models: a list of at most 64 names", false;
      for (const auto& m : kv.second) {
        if (!m.IsScalar()) return error = at_line(m) + ": models: names only", false;
        r.models.push_back(m.Scalar());
      }
      continue;
    }
    if (!kv.second.IsScalar())
      return error = at_line(kv.second) + ": " + k + " must be a plain value", false;
    const std::string v = kv.second.Scalar();
    if (k == "id") {
      r.id = v;
    } else if (k == "tenant") {
      r.tenant = v;
    } else if (k == "sha256") {
      if (!from_hex(v, r.hash))
        return error = at_line(kv.second) + ": sha256: 64 hex digits", false;
    } else if (k == "prefix") {
      r.prefix = v;
    } else if (k == "expires") {
      r.expires_at = parse_expiry(v);
      if (!r.expires_at)
        return error = at_line(kv.second) + ": expires: RFC 3339 UTC or unix seconds", false;
    } else if (k == "maxObjective") {
      r.max_objective = v;
    } else if (k == "maxTokens") {
      if (v.empty() || v.size() > 10 ||
          !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return error = at_line(kv.second) + ": maxTokens: a whole number", false;
      r.max_tokens = std::stoull(v);
    } else if (k == "disabled") {
      if (v != "true" && v != "false")
        return error = at_line(kv.second) + ": disabled: true or false", false;
      r.disabled = v == "true";
    } else {
      return error = at_line(kv.first) + ": unknown field " + k, false;
    }
  }
  if (auto bad = check_key_record(r)) return error = at_line(item) + ": " + bad.message, false;
  if (r.prefix.size() > kPrefixChars || !protocol::is_valid_steering_value(r.prefix, kPrefixChars))
    r.prefix.clear();
  return true;
}

bool parse_key_document(const YAML::Node& root, std::vector<KeyRecord>& out, std::string& error) {
  if (root.IsNull()) return true;
  if (!root.IsMap()) return error = "the key file must be a mapping with keys:", false;
  for (const auto& kv : root)
    if (kv.first.Scalar() != "keys") return error = at_line(kv.first) + ": unknown field", false;
  const YAML::Node keys = root["keys"];
  if (!keys || keys.IsNull()) return true;
  if (!keys.IsSequence()) return error = at_line(keys) + ": keys: must be a list", false;
  if (keys.size() > kMaxKeys) return error = "more than 100000 keys", false;
  std::set<std::string> ids;
  std::set<Digest> hashes;
  for (const auto& item : keys) {
    KeyRecord r;
    if (!read_record(item, r, error)) return false;
    if (!ids.insert(r.id).second) return error = at_line(item) + ": repeated id " + r.id, false;
    if (!hashes.insert(r.hash).second)
      return error = at_line(item) + ": the same key hash as another entry", false;
    out.push_back(std::move(r));
  }
  return true;
}

}  // namespace

bool parse_key_file(std::string_view text, std::vector<KeyRecord>& out, std::string& error) {
  out.clear();
  try {
    if (!parse_key_document(YAML::Load(std::string(text)), out, error)) {
      out.clear();
      return false;
    }
  } catch (const std::exception& e) {
    out.clear();
    error = e.what();
    return false;
  }
  return true;
}

namespace {

// Each limit on one line, every value quoted (names and models hold no
// quote or backslash: check_key_record).
void render_quotas(const std::vector<config::QuotaLimitSpec>& quotas, std::string& s) {
  if (quotas.empty()) return;
  s += "    quotas:\n";
  for (const auto& l : quotas) {
    s += "      - {";
    const char* sep = "";
    for (const auto& [k, v] : config::quota_limit_fields(l)) {
      s += sep + k + ": \"" + v + "\"";
      sep = ", ";
    }
    if (!l.models.empty()) {
      s += ", models: [";
      for (std::size_t i = 0; i < l.models.size(); ++i)
        s += (i ? ", \"" : "\"") + l.models[i] + "\"";
      s += "]";
    }
    s += "}\n";
  }
}

}  // namespace

std::string render_key_file(const std::vector<KeyRecord>& records) {
  std::string s = "# sluice API keys: hashes only (auth/api_keys.h)\nkeys:\n";
  for (const auto& r : records) {
    s += "  - id: " + r.id + "\n    tenant: \"" + r.tenant + "\"\n    sha256: " + to_hex(r.hash) +
         "\n";
    if (!r.prefix.empty()) s += "    prefix: \"" + r.prefix + "\"\n";
    if (r.expires_at) s += "    expires: " + format_expiry(*r.expires_at) + "\n";
    if (r.disabled) s += "    disabled: true\n";
    if (!r.models.empty()) {
      s += "    models: [";
      for (std::size_t i = 0; i < r.models.size(); ++i)
        s += (i ? ", \"" : "\"") + r.models[i] + "\"";
      s += "]\n";
    }
    if (!r.max_objective.empty()) s += "    maxObjective: \"" + r.max_objective + "\"\n";
    if (r.max_tokens > 0) s += "    maxTokens: " + std::to_string(r.max_tokens) + "\n";
    render_quotas(r.quotas, s);
  }
  return s;
}

std::optional<NewKey> generate_key(std::string_view tenant, std::string_view id) {
  std::uint8_t secret[32];
  if (!random_bytes(secret, sizeof secret)) return std::nullopt;
  NewKey k;
  k.key = std::string(kKeyScheme) +
          base64url_encode(std::string_view(reinterpret_cast<const char*>(secret), sizeof secret));
  k.record.tenant = std::string(tenant);
  k.record.hash = sha256(k.key);
  k.record.prefix = k.key.substr(0, kPrefixChars);
  if (id.empty()) {
    std::uint8_t r[4];
    if (!random_bytes(r, sizeof r)) return std::nullopt;
    Digest tmp{};
    std::copy(r, r + 4, tmp.begin());
    k.record.id = "key_" + to_hex(tmp).substr(0, 8);
  } else {
    k.record.id = std::string(id);
  }
  return k;
}

}  // namespace sluice::auth
