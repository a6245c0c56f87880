// /admin/v1/keys (GET: every key's record; POST: a new key, shown once) and
// /admin/v1/keys/{id} (GET; PUT: add or replace a record by its hash, which
// is how a key reaches the other replicas of a fleet; DELETE: revoke). No
// answer ever holds a key but POST's, and no log line any key.
#include "admin/handlers.h"
#include "config/quota_limit.h"
#include "fleet/fleet_sync.h"
#include "observe/log.h"

namespace sluice::admin {

using json = nlohmann::json;

namespace {

json key_json(const KeyEntry& k) {
  json j{{"id", k.record.id},
         {"tenant", k.record.tenant},
         {"prefix", k.record.prefix},
         {"disabled", k.record.disabled},
         {"source", k.from_file ? "file" : "admin"}};
  j["expires"] = k.record.expires_at ? json(auth::format_expiry(*k.record.expires_at)) : json();
  if (!k.record.models.empty()) j["models"] = k.record.models;
  if (!k.record.max_objective.empty()) j["maxObjective"] = k.record.max_objective;
  if (k.record.max_tokens > 0) j["maxTokens"] = k.record.max_tokens;
  if (!k.record.quotas.empty()) {
    json quotas = json::array();
    for (const auto& l : k.record.quotas) {
      json q = json::object();
      for (const auto& [name, value] : config::quota_limit_fields(l)) q[name] = value;
      if (!l.models.empty()) q["models"] = l.models;
      quotas.push_back(std::move(q));
    }
    j["quotas"] = std::move(quotas);
  }
  return j;
}

// One limit of "quotas" ({"name": "tpm", "tokens": "20k", "window": "1m"},
// the YAML's names; a number as a JSON number or a string); "" or what is
// wrong, as "field: what".
std::string read_quota_limit(const json& j, config::QuotaLimitSpec& out) {
  if (!j.is_object()) return "an object";
  config::QuotaLimitDraft d;
  for (const auto& [key, value] : j.items()) {
    std::string bad;
    if (key == "models") {
      if (!value.is_array()) bad = "a list of model names";
      for (std::size_t i = 0; bad.empty() && value.is_array() && i < value.size(); ++i)
        bad = value[i].is_string() ? d.add_model(value[i].get<std::string>()) : "names only";
    } else if (value.is_string()) {
      bad = d.set(key, value.get<std::string>());
    } else if (value.is_number()) {
      bad = d.set(key, value.dump());  // 0.25, 20000: the number's own digits
    } else {
      bad = "must be a string or a number";
    }
    if (!bad.empty()) return key + ": " + bad;
  }
  if (auto bad = d.finish(out)) return (bad.field.empty() ? "" : bad.field + ": ") + bad.what;
  return "";
}

// "quotas": a list of limits ([] or null: none).
std::optional<AdminReply> read_key_quotas(const json& j, auth::KeyRecord& r) {
  auto it = j.find("quotas");
  if (it == j.end()) return std::nullopt;
  if (!it->is_null() && (!it->is_array() || it->size() > config::kMaxQuotaLimits))
    return error_reply(400, "invalid-quota", "quotas must be a list of at most 16 limits");
  r.quotas.clear();
  for (std::size_t i = 0; it->is_array() && i < it->size(); ++i) {
    config::QuotaLimitSpec l;
    if (auto bad = read_quota_limit((*it)[i], l); !bad.empty())
      return error_reply(400, "invalid-quota", "quotas[" + std::to_string(i) + "]: " + bad);
    r.quotas.push_back(std::move(l));
  }
  return std::nullopt;
}

// A key's limit may not be wider than its tenant's of the same measure and
// window (a request is charged to both: the key's would never bind).
std::optional<AdminReply> within_tenant(HandlerContext& hc, const auth::KeyRecord& r) {
  if (r.quotas.empty()) return std::nullopt;
  const auto tenant = hc.backend.tenant_quotas(r.tenant);
  for (const auto& l : r.quotas)
    if (const auto* t = config::tenant_limit_narrower_than(l, tenant))
      return error_reply(400, "quota_wider_than_tenant",
                         "quota '" + l.name + "' is wider than tenant '" + r.tenant +
                             "''s quota '" + t->name + "' (" + std::string(to_string(t->measure)) +
                             " over the same window): a key's limits are within its tenant's");
  return std::nullopt;
}

// A key's scope in its body: "models" (a list; [] or null: the tenant's),
// "maxObjective" and "maxTokens" (null, "" or 0: the tenant's).
std::optional<AdminReply> read_key_scope(const json& j, auth::KeyRecord& r) {
  if (auto it = j.find("models"); it != j.end()) {
    if (!it->is_null() && !it->is_array())
      return error_reply(400, "invalid-scope", "models must be a list of model names");
    r.models.clear();
    if (it->is_array())
      for (const auto& m : *it) {
        if (!m.is_string())
          return error_reply(400, "invalid-scope", "models must be a list of model names");
        r.models.push_back(m.get<std::string>());
      }
  }
  if (auto it = j.find("maxObjective"); it != j.end()) {
    if (!it->is_null() && !it->is_string())
      return error_reply(400, "invalid-scope", "maxObjective must be a string or null");
    r.max_objective = it->is_string() ? it->get<std::string>() : "";
  }
  if (auto it = j.find("maxTokens"); it != j.end()) {
    if (!it->is_null() && !it->is_number_unsigned())
      return error_reply(400, "invalid-scope", "maxTokens must be a whole number or null");
    r.max_tokens = it->is_null() ? 0 : it->get<std::uint64_t>();
  }
  return read_key_quotas(j, r);
}

// The optional fields of a key's body (tenant, expires, disabled, prefix)
// into `r`; an error reply if one is malformed. The whole record is then
// checked by auth::check_key_record, as the key file's reader does.
std::optional<AdminReply> read_key_fields(const json& j, auth::KeyRecord& r) {
  if (auto it = j.find("tenant"); it != j.end()) {
    if (!it->is_string()) return error_reply(400, "invalid-tenant", "tenant must be a string");
    r.tenant = it->get<std::string>();
  }
  if (auto it = j.find("expires"); it != j.end()) {
    // Within what the key file writes and reads back: a number is taken as
    // it is, never wrapped (2^64-1 is not -1).
    std::optional<std::int64_t> e;
    if (it->is_string()) e = auth::parse_expiry(it->get<std::string>());
    if (it->is_number_unsigned() && it->get<std::uint64_t>() <= auth::kMaxKeyExpiry)
      e = static_cast<std::int64_t>(it->get<std::uint64_t>());
    if (!it->is_null() && !e)
      return error_reply(400, "invalid-expires",
                         "expires must be RFC 3339 UTC (2027-01-01T00:00:00Z) or unix seconds, "
                         "at most 9999-12-31T23:59:59Z (253402300799), or null");
    r.expires_at = e;
  }
  if (auto it = j.find("disabled"); it != j.end()) {
    if (!it->is_boolean())
      return error_reply(400, "invalid-disabled", "disabled must be a boolean");
    r.disabled = it->get<bool>();
  }
  return read_key_scope(j, r);
}

AdminReply refused(const KeyWriteResult& r) { return error_reply(r.status, r.code, r.message); }

std::optional<json> parse_object(const std::string& body, AdminReply& error) {
  json j = json::parse(body.empty() ? "{}" : body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    error = error_reply(400, "invalid-body", "the body must be a JSON object");
    return std::nullopt;
  }
  return j;
}

}  // namespace

// By id, at most ?limit= (default 1000); x-total-count says how many
// there are (as /admin/v1/flows).
void list_keys(HandlerContext& hc, const Request& req, Respond respond) {
  auto limit = limit_param(req.target, 1000, 1000000);
  if (!limit)
    return respond(
        error_reply(400, "invalid-limit", "limit must be a whole number from 1 to 1000000"));
  const auto keys = hc.backend.keys();
  json out = json::array();
  for (std::size_t i = 0; i < keys.size() && i < *limit; ++i) out.push_back(key_json(keys[i]));
  AdminReply r{200, out.dump(-1, ' ', false, kReplace)};
  r.total = keys.size();
  respond(std::move(r));
}

void get_key(HandlerContext& hc, const Request& req, Respond respond) {
  const auto k = hc.backend.find_key(std::string(req.param));
  if (!k)
    return respond(error_reply(404, "unknown-key", "no key '" + std::string(req.param) + "'"));
  respond(AdminReply{200, key_json(*k).dump(-1, ' ', false, kReplace)});
}

// A new key for a tenant: {"tenant", "id"?, "expires"?, and its scope?}. The answer holds
// the key, once; the record (its hash) goes to the other replicas as a PUT.
void create_key(HandlerContext& hc, const Request& req, Respond respond) {
  AdminReply error;
  auto j = parse_object(req.body, error);
  if (!j) return respond(error);
  std::string id;
  if (auto it = j->find("id"); it != j->end()) {
    if (!it->is_string() || !auth::is_valid_key_id(it->get<std::string>()))
      return respond(
          error_reply(400, "invalid-id", "id must be 1 to 64 of letters, digits, _ . -"));
    id = it->get<std::string>();
    if (hc.backend.find_key(id))
      return respond(error_reply(409, "key-exists", "a key with id '" + id + "' exists"));
  }
  auth::KeyRecord fields;
  if (auto bad = read_key_fields(*j, fields)) return respond(*bad);
  auto made = auth::generate_key(fields.tenant, id);
  if (!made) return respond(error_reply(500, "no-randomness", "the CSPRNG failed"));
  made->record.expires_at = fields.expires_at;
  made->record.disabled = fields.disabled;
  made->record.models = fields.models;
  made->record.max_objective = fields.max_objective;
  made->record.max_tokens = fields.max_tokens;
  made->record.quotas = fields.quotas;
  if (auto bad = auth::check_key_record(made->record))
    return respond(error_reply(400, bad.code, bad.message));
  if (auto bad = within_tenant(hc, made->record)) return respond(*bad);
  hc.backend.put_key(made->record, [&hc, made = *made, respond](KeyWriteResult e) {
    hc.post([&hc, made, respond, e] {
      if (!e.ok()) return respond(refused(e));
      SLUICE_LOG(kInfo, "admin",
                 "key " << made.record.id << " (" << made.record.prefix << "...) made for tenant "
                        << made.record.tenant);
      if (hc.fleet()) {
        json rec = key_json(KeyEntry{made.record, false});
        rec.erase("source");
        rec["sha256"] = auth::to_hex(made.record.hash);
        hc.fleet()->publish_operation(
            fleet::FleetOperation{"PUT", "/admin/v1/keys/" + made.record.id, rec.dump()});
      }
      // Without a fleet the key is written into the key file: listed as
      // `file` from then on, so named that way here too.
      json out = key_json(KeyEntry{made.record, !hc.fleet()});
      out["key"] = made.key;
      respond(AdminReply{201, out.dump(-1, ' ', false, kReplace)});
    });
  });
}

// A record by its hash ({"sha256", "tenant", ...}), or a change to an
// existing admin-made one (its hash kept when none is sent).
void put_key(HandlerContext& hc, const Request& req, Respond respond) {
  const std::string id(req.param);
  if (!auth::is_valid_key_id(id))
    return respond(error_reply(400, "invalid-id", "id must be 1 to 64 of letters, digits, _ . -"));
  AdminReply error;
  auto j = parse_object(req.body, error);
  if (!j) return respond(error);
  const auto old = hc.backend.find_key(id);
  auth::KeyRecord r = old ? old->record : auth::KeyRecord{};
  r.id = id;
  if (auto it = j->find("sha256"); it != j->end()) {
    if (!it->is_string() || !auth::from_hex(it->get<std::string>(), r.hash))
      return respond(error_reply(400, "invalid-sha256", "sha256 must be 64 hex digits"));
  } else if (!old) {
    // A change (disable, expiry) to a key that is not there.
    return respond(
        error_reply(404, "unknown-key", "no key '" + id + "' (a new record needs its sha256)"));
  }
  if (auto it = j->find("prefix"); it != j->end() && it->is_string()) {
    r.prefix = it->get<std::string>();
    if (r.prefix.size() > auth::kPrefixChars ||
        !protocol::is_valid_steering_value(r.prefix, auth::kPrefixChars))
      r.prefix.clear();
  }
  if (auto bad = read_key_fields(*j, r)) return respond(*bad);
  if (auto bad = auth::check_key_record(r)) return respond(error_reply(400, bad.code, bad.message));
  // Checked when the limits or the tenant change here: another replica's
  // change was checked where it was made, and a key's other changes
  // (disabling it) never wait on limits it had already (a key file's).
  if (!req.replicated && (j->contains("quotas") || j->contains("tenant")))
    if (auto bad = within_tenant(hc, r)) return respond(*bad);
  hc.backend.put_key(r, [&hc, r, respond](KeyWriteResult e) {
    hc.post([r, respond, e] {
      if (!e.ok()) return respond(refused(e));
      SLUICE_LOG(
          kInfo, "admin",
          "key " << r.id << " set for tenant " << r.tenant << (r.disabled ? " (disabled)" : ""));
      respond(AdminReply{200, key_json(KeyEntry{r, false}).dump(-1, ' ', false, kReplace)});
    });
  });
}

void delete_key(HandlerContext& hc, const Request& req, Respond respond) {
  const std::string id(req.param);
  hc.backend.delete_key(id, [&hc, id, respond, replicated = req.replicated](bool found,
                                                                            KeyWriteResult e) {
    hc.post([id, respond, replicated, found, e] {
      if (!e.ok()) return respond(refused(e));
      if (!found) {
        // Already gone here (a replica applying another's revocation
        // twice): the revocation holds, so replaying it is no error.
        if (replicated) return respond(AdminReply{200, "{}"});
        return respond(error_reply(404, "unknown-key",
                                   "no key '" + id +
                                       "' this replica may revoke (in a fleet, a key of the key "
                                       "file is revoked by editing the file)"));
      }
      SLUICE_LOG(kInfo, "admin", "key " << id << " revoked");
      respond(AdminReply{200, json{{"id", id}, {"revoked", true}}.dump()});
    });
  });
}

}  // namespace sluice::admin
