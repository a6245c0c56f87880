// The auth: and tenants: sections (config.h AuthSpec, TenantSpec).
#include "config/auth_config.h"

#include <algorithm>
#include <map>
#include <set>

#include "config/quota_config.h"
#include "config/reader.h"
#include "protocol/steering.h"

namespace sluice::config {
namespace {

using namespace detail;

// Tenant ids and sub-flow names become flow ids: the fairness id's bytes
// and length (server.maxFairnessIdBytes, checked by the caller).
constexpr std::size_t kMaxTenantIdBytes = 128;

std::vector<std::string> string_list(const Reader& r, const YAML::Node& n,
                                     const std::string& path) {
  r.sequence(n, path);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    out.push_back(r.string(n[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

void read_api_keys(const Reader& r, const YAML::Node& node, ApiKeysSpec& k) {
  Fields f(r.source, node, "auth.apiKeys");
  if (auto n = f.take("file")) k.file = r.string(n, "auth.apiKeys.file");
  if (auto n = f.take("pollInterval"))
    k.poll_interval =
        positive(r, n, "auth.apiKeys.pollInterval", r.duration(n, "auth.apiKeys.pollInterval"));
  if (auto n = f.take("maxPendingWrites")) {
    auto v = r.integer(n, "auth.apiKeys.maxPendingWrites");
    if (v < 1 || v > 10000)
      fail(r.source, n, "auth.apiKeys.maxPendingWrites", "must be between 1 and 10000");
    k.max_pending_writes = static_cast<std::uint32_t>(v);
  }
  f.finish();
}

void read_jwt_source(const Reader& r, Fields& f, const YAML::Node& node, JwtSpec& j) {
  if (auto n = f.take("jwksFile")) j.jwks_file = r.string(n, "auth.jwt.jwksFile");
  if (auto n = f.take("jwksUrl")) {
    j.jwks_url = r.string(n, "auth.jwt.jwksUrl");
    if (j.jwks_url.rfind("http://", 0) != 0 && j.jwks_url.rfind("https://", 0) != 0)
      fail(r.source, n, "auth.jwt.jwksUrl", "must start with http:// or https://");
  }
  if (auto n = f.take("jwksCaFile")) j.jwks_ca_file = r.string(n, "auth.jwt.jwksCaFile");
  if (j.jwks_file.empty() == j.jwks_url.empty())
    fail(r.source, node, "auth.jwt", "set exactly one of jwksFile and jwksUrl");
  if (auto n = f.take("jwksRefreshInterval"))
    j.jwks_refresh_interval = positive(r, n, "auth.jwt.jwksRefreshInterval",
                                       r.duration(n, "auth.jwt.jwksRefreshInterval"));
  if (auto n = f.take("jwksMinRefetchInterval"))
    j.jwks_min_refetch_interval = positive(r, n, "auth.jwt.jwksMinRefetchInterval",
                                           r.duration(n, "auth.jwt.jwksMinRefetchInterval"));
}

void read_jwt(const Reader& r, const YAML::Node& node, JwtSpec& j) {
  Fields f(r.source, node, "auth.jwt");
  j.enabled = true;
  read_jwt_source(r, f, node, j);
  if (auto n = f.take("issuer")) j.issuer = r.string(n, "auth.jwt.issuer");
  if (auto n = f.take("audiences")) j.audiences = string_list(r, n, "auth.jwt.audiences");
  if (auto n = f.take("algorithms")) {
    j.algorithms = string_list(r, n, "auth.jwt.algorithms");
    if (j.algorithms.empty()) fail(r.source, n, "auth.jwt.algorithms", "must not be empty");
    for (std::size_t i = 0; i < j.algorithms.size(); ++i) {
      const auto& a = j.algorithms[i];
      if (a != "RS256" && a != "ES256" && a != "EdDSA")
        fail(r.source, n[i], "auth.jwt.algorithms[" + std::to_string(i) + "]",
             "unsupported algorithm '" + a +
                 "' (expected RS256, ES256 or EdDSA; none and HMAC are never accepted)");
    }
  }
  if (auto n = f.take("leeway")) j.leeway = r.duration(n, "auth.jwt.leeway");
  if (auto n = f.take("tenantClaim")) j.tenant_claim = r.string(n, "auth.jwt.tenantClaim");
  if (auto n = f.take("objectiveClaim")) j.objective_claim = r.string(n, "auth.jwt.objectiveClaim");
  if (auto n = f.take("modelsClaim")) j.models_claim = r.string(n, "auth.jwt.modelsClaim");
  if (auto n = f.take("maxTokensClaim"))
    j.max_tokens_claim = r.string(n, "auth.jwt.maxTokensClaim");
  if (auto n = f.take("maxTokenBytes")) {
    auto v = r.quantity(n, "auth.jwt.maxTokenBytes");
    if (v < 256 || v > 65536)
      fail(r.source, n, "auth.jwt.maxTokenBytes", "must be between 256 and 65536");
    j.max_token_bytes = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("cacheEntries")) {
    auto v = r.integer(n, "auth.jwt.cacheEntries");
    if (v < 0 || v > 1000000)
      fail(r.source, n, "auth.jwt.cacheEntries", "must be between 0 and 1000000");
    j.cache_entries = static_cast<std::uint32_t>(v);
  }
  f.finish();
}

void read_trusted_proxies(const Reader& r, const YAML::Node& n, std::vector<std::string>& out) {
  out = string_list(r, n, "auth.trustedProxies");
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!parse_cidr(out[i]))
      fail(r.source, n[i], "auth.trustedProxies[" + std::to_string(i) + "]",
           "expected an address block such as 10.0.0.0/8 or fd00::/8, or an address; got '" +
               out[i] + "'");
  }
}

}  // namespace

void read_auth(const Reader& r, const YAML::Node& node, AuthSpec& a) {
  Fields f(r.source, node, "auth");
  if (auto n = f.take("apiKeys")) {
    read_api_keys(r, n, a.api_keys);
    a.enabled = true;
  }
  if (auto n = f.take("jwt")) {
    read_jwt(r, n, a.jwt);
    a.enabled = true;
  }
  if (auto n = f.take("trustedProxies")) read_trusted_proxies(r, n, a.trusted_proxies);
  if (auto n = f.take("clientCertificateTenants")) {
    a.client_certificate_tenants = r.boolean(n, "auth.clientCertificateTenants");
    a.enabled = a.enabled || a.client_certificate_tenants;
  }
  if (auto n = f.take("realm")) {
    a.realm = r.string(n, "auth.realm");
    if (!protocol::is_valid_steering_value(a.realm, 64))
      fail(r.source, n, "auth.realm", "must be 1 to 64 token characters");
  }
  f.finish();
}

namespace {

std::string objective_ref(const Reader& r, const YAML::Node& n, const std::string& path,
                          const std::set<std::string>& objectives) {
  auto name = r.string(n, path);
  if (!objectives.count(name))
    fail(r.source, n, path, "no objective named '" + name + "' (see objectives:)");
  return name;
}

bool clamp_or_refuse(const Reader& r, const YAML::Node& n, const std::string& path) {
  auto v = r.string(n, path);
  if (v != "clamp" && v != "refuse") fail(r.source, n, path, "expected clamp or refuse");
  return v == "refuse";
}

void read_tenant_objectives(const Reader& r, Fields& f, TenantSpec& t,
                            const std::set<std::string>& objectives) {
  if (auto n = f.take("objectives")) {
    r.sequence(n, f.child("objectives"));
    for (std::size_t i = 0; i < n.size(); ++i)
      t.objectives.push_back(objective_ref(
          r, n[i], f.child("objectives") + "[" + std::to_string(i) + "]", objectives));
  }
  if (auto n = f.take("maxObjective"))
    t.max_objective = objective_ref(r, n, f.child("maxObjective"), objectives);
  if (auto n = f.take("aboveMaxObjective"))
    t.refuse_above_max_objective = clamp_or_refuse(r, n, f.child("aboveMaxObjective"));
  if (auto n = f.take("defaultObjective"))
    t.default_objective = objective_ref(r, n, f.child("defaultObjective"), objectives);
}

void read_tenant_limits(const Reader& r, Fields& f, TenantSpec& t) {
  if (auto n = f.take("models")) {
    t.models = string_list(r, n, f.child("models"));
    for (std::size_t i = 0; i < t.models.size(); ++i)
      if (t.models[i] == "*" || (t.models[i].find('*') != std::string::npos &&
                                 t.models[i].find('*') != t.models[i].size() - 1))
        fail(r.source, n[i], f.child("models") + "[" + std::to_string(i) + "]",
             "a model is a name, or a prefix ending in '*' (omit models: for any model)");
  }
  if (auto n = f.take("maxTokens")) t.max_tokens = r.quantity(n, f.child("maxTokens"));
  if (auto n = f.take("aboveMaxTokens"))
    t.refuse_above_max_tokens = clamp_or_refuse(r, n, f.child("aboveMaxTokens"));
  if (auto n = f.take("maxConcurrency")) {
    auto v = r.integer(n, f.child("maxConcurrency"));
    if (v < 0 || v > 1000000)
      fail(r.source, n, f.child("maxConcurrency"), "must be between 0 and 1000000");
    t.max_concurrency = static_cast<std::uint32_t>(v);
  }
  if (auto n = f.take("weight")) {
    t.weight = r.number(n, f.child("weight"));
    if (!(*t.weight >= kMinFlowWeight) || *t.weight > kMaxFlowWeight)
      fail(r.source, n, f.child("weight"), "must be at least 0.000001 and at most 1000000");
  }
  if (auto n = f.take("subflows")) {
    t.subflows = string_list(r, n, f.child("subflows"));
    for (std::size_t i = 0; i < t.subflows.size(); ++i)
      if (t.subflows[i] != "*" && !protocol::is_valid_steering_value(t.subflows[i], 64))
        fail(r.source, n[i], f.child("subflows") + "[" + std::to_string(i) + "]",
             "a sub-flow name is 1 to 64 token characters, or *");
  }
}

// A certificate name: printable, at most 1024 bytes; '*' only as the whole
// last path segment of a URI ("spiffe://td/ns/prod/sa/*").
std::string certificate_name_error(const std::string& name) {
  if (name.empty() || name.size() > 1024) return "a certificate name is 1 to 1024 bytes";
  for (unsigned char ch : name)
    if (ch < 0x20 || ch == 0x7f) return "a certificate name has no control characters";
  const auto star = name.find('*');
  if (star == std::string::npos) return "";
  // A URI with an authority (a SPIFFE trust domain) before the pattern.
  const auto scheme = name.find("://");
  if (star != name.size() - 1 || name.size() < 2 || name[star - 1] != '/' ||
      scheme == std::string::npos || scheme + 3 >= star - 1 || name[scheme + 3] == '/')
    return "'*' stands only for the last path segment of a URI, as in spiffe://td/ns/prod/sa/*";
  return "";
}

void read_certificate_names(const Reader& r, Fields& f, TenantSpec& t,
                            std::map<std::string, std::string>& owners) {
  auto n = f.take("certificateNames");
  if (!n) return;
  if (t.id == "*")
    fail(r.source, n, f.child("certificateNames"),
         "the default policy has no certificate names: name each tenant's");
  t.certificate_names = string_list(r, n, f.child("certificateNames"));
  for (std::size_t i = 0; i < t.certificate_names.size(); ++i) {
    const std::string& name = t.certificate_names[i];
    const std::string path = f.child("certificateNames") + "[" + std::to_string(i) + "]";
    if (auto bad = certificate_name_error(name); !bad.empty()) fail(r.source, n[i], path, bad);
    auto [it, fresh] = owners.emplace(name, t.id);
    if (!fresh)
      fail(r.source, n[i], path,
           "'" + name + "' names tenant '" + it->second + "' already: a name is one tenant's");
  }
}

}  // namespace

void read_tenants(const Reader& r, const YAML::Node& node, const std::vector<ObjectiveConfig>& objs,
                  std::vector<TenantSpec>& out) {
  std::set<std::string> seen, objectives;
  std::map<std::string, std::string> certificate_owners;
  for (const auto& o : objs) objectives.insert(o.name);
  read_list(r, node, "tenants", out, [&](Fields& f, const YAML::Node& item, TenantSpec& t) {
    t.line = item.Mark().line + 1;
    t.id = unique_key(r, f, item, "id", seen, "tenant");
    if (t.id != "*" && (!protocol::is_valid_steering_value(t.id, kMaxTenantIdBytes) ||
                        t.id.find('/') != std::string::npos))
      fail(r.source, item["id"], f.child("id"),
           "a tenant id is 1 to 128 token characters without '/' (it is the tenant's flow id)");
    read_tenant_objectives(r, f, t, objectives);
    read_tenant_limits(r, f, t);
    if (auto n = f.take("quotas")) read_tenant_quotas(r, n, f.child("quotas"), t);
    read_certificate_names(r, f, t, certificate_owners);
  });
}

// A tenant's weight is its flow's: it joins flows: (a flow listed there too
// with a weight of its own is an error: which one would hold?).
void tenant_weights_to_flows(const Reader& r, const YAML::Node& node, Config& c) {
  for (std::size_t i = 0; i < c.tenants.size(); ++i) {
    const auto& t = c.tenants[i];
    if (!t.weight || t.id == "*") continue;
    auto it = std::find_if(c.flows.begin(), c.flows.end(),
                           [&](const FlowConfig& fl) { return fl.id == t.id; });
    if (it != c.flows.end())
      fail(r.source, node[i], "tenants[" + std::to_string(i) + "].weight",
           "flow '" + t.id + "' has a weight under flows: too; set it in one place");
    c.flows.push_back(FlowConfig{t.id, *t.weight});
  }
}

}  // namespace sluice::config
