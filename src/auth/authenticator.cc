#include "auth/authenticator.h"

namespace sluice::auth {

std::string_view to_string(Source s) {
  switch (s) {
    case Source::kNone:
      return "none";
    case Source::kTrustedProxy:
      return "trusted-proxy";
    case Source::kApiKey:
      return "api-key";
    case Source::kJwt:
      return "jwt";
    case Source::kClientCertificate:
      return "client-certificate";
  }
  return "none";
}

std::string_view bearer_token(std::string_view h) {
  static constexpr std::string_view kScheme = "bearer";
  if (h.size() <= kScheme.size() + 1) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    const char c = h[i];
    if ((c | 0x20) != kScheme[i]) return {};
  }
  std::size_t i = kScheme.size();
  if (h[i] != ' ') return {};
  while (i < h.size() && h[i] == ' ') ++i;
  std::string_view t = h.substr(i);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  // RFC 6750 token68: no spaces inside.
  if (t.empty() || t.find_first_of(" \t,") != std::string_view::npos) return {};
  return t;
}

namespace {

JwtOptions jwt_options(const config::JwtSpec& j) {
  JwtOptions o;
  o.issuer = j.issuer;
  o.audiences = j.audiences;
  o.algorithms.clear();
  for (const auto& a : j.algorithms)
    if (auto alg = parse_alg(a)) o.algorithms.push_back(*alg);
  o.leeway_seconds = std::chrono::duration_cast<std::chrono::seconds>(j.leeway).count();
  o.tenant_claim = j.tenant_claim;
  o.objective_claim = j.objective_claim;
  o.models_claim = j.models_claim;
  o.max_tokens_claim = j.max_tokens_claim;
  o.max_token_bytes = j.max_token_bytes;
  return o;
}

}  // namespace

bool looks_like_jwt(std::string_view t) {
  const auto first = t.find('.');
  if (first == std::string_view::npos) return false;
  const auto second = t.find('.', first + 1);
  return second != std::string_view::npos && t.find('.', second + 1) == std::string_view::npos;
}

Authenticator::Authenticator(const config::Config& c, std::shared_ptr<const KeyStore> keys,
                             std::shared_ptr<const Jwks> jwks)
    : enabled_(c.auth.enabled),
      client_certificate_tenants_(c.auth.client_certificate_tenants),
      keys_(std::move(keys)),
      jwt_enabled_(c.auth.jwt.enabled),
      jwt_(jwt_options(c.auth.jwt)),
      jwks_(std::move(jwks)),
      tenants_(c),
      realm_(c.auth.realm) {
  // The config reader checked each block.
  for (const auto& t : c.auth.trusted_proxies)
    if (auto cidr = config::parse_cidr(t)) trusted_.push_back(*cidr);
  for (const auto& t : c.tenants)
    for (const auto& name : t.certificate_names) {
      if (name.ends_with("/*"))
        certificate_prefixes_.emplace_back(name.substr(0, name.size() - 1), t.id);
      else
        certificate_names_.emplace(name, t.id);
    }
  if (keys_)
    keys_->for_each([this](const KeyRecord& r) {
      if (r.scoped())
        scoped_.emplace(&r, tenants_.scoped(tenants_.find(r.tenant), r.tenant,
                                            r.models.empty() ? nullptr : &r.models, r.max_objective,
                                            r.max_tokens));
    });
}

bool Authenticator::trusted(const std::array<unsigned char, 16>& address) const {
  for (const auto& c : trusted_)
    if (config::cidr_contains(c, address)) return true;
  return false;
}

namespace {

// One SPIFFE path segment: letters, digits, '.', '-', '_'; not "." or "..".
bool is_path_segment(std::string_view s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string_view Authenticator::certificate_tenant(std::string_view name) const {
  if (auto it = certificate_names_.find(std::string(name)); it != certificate_names_.end())
    return it->second;
  for (const auto& [prefix, tenant] : certificate_prefixes_)
    if (name.starts_with(prefix) && is_path_segment(name.substr(prefix.size()))) return tenant;
  return {};
}

void Authenticator::settle(Identity& out) const { out.policy = tenants_.find(out.tenant); }

AuthOutcome Authenticator::check_key(std::string_view key, std::int64_t now_unix,
                                     Identity& out) const {
  const KeyRecord* record = nullptr;
  const KeyCheck k = keys_ ? keys_->check(key, now_unix, &record) : KeyCheck::kUnknown;
  if (record) out.key_id = record->id;  // named in the log even when refused
  switch (k) {
    case KeyCheck::kOk:
      out.source = Source::kApiKey;
      out.tenant = record->tenant;
      settle(out);
      if (record->scoped()) out.policy = &scoped_.find(record)->second;
      return {};
    case KeyCheck::kExpired:
      return {AuthFailure::kExpiredKey, to_string(k)};
    case KeyCheck::kDisabled:
      return {AuthFailure::kDisabledKey, to_string(k)};
    case KeyCheck::kUnknown:
      break;
  }
  return {AuthFailure::kUnknownKey, to_string(KeyCheck::kUnknown)};
}

// A verified token costs a SHA-256 and a lookup in the thread's cache
// until it expires; the first sight of it, a signature check.
AuthOutcome Authenticator::check_jwt(std::string_view token, std::int64_t now_unix, Identity& out,
                                     TokenCache* cache) const {
  const Digest key = TokenCache::key_of(token);
  const VerifiedToken* v = cache ? cache->find(key, now_unix) : nullptr;
  VerifiedToken fresh;
  if (!v) {
    if (!jwks_) return {AuthFailure::kInvalidToken, "token-unknown-kid", true};
    const JwtError e = verify_jwt(token, *jwks_, jwt_, now_unix, fresh);
    if (e != JwtError::kNone)
      return {AuthFailure::kInvalidToken, to_string(e), e == JwtError::kUnknownKey};
    // A tenant is a flow id and '/' separates its sub-flows: a token may
    // not name "acme/x" to reach tenant acme's sub-flow x.
    if (fresh.tenant.find('/') != std::string::npos)
      return {AuthFailure::kInvalidToken, to_string(JwtError::kBadTenant)};
    if (fresh.scoped())
      fresh.policy = std::make_shared<const TenantPolicy>(
          tenants_.scoped(tenants_.find(fresh.tenant), fresh.tenant,
                          fresh.has_models ? &fresh.models : nullptr, "", fresh.max_tokens));
    if (cache) cache->insert(key, fresh, now_unix);
    v = &fresh;
  }
  out.source = Source::kJwt;
  out.tenant = v->tenant;
  out.objective = v->objective;
  out.key_id = "jwt:" + v->kid;
  settle(out);
  if (v->policy) {
    out.scoped_policy = v->policy;  // held for the request: the cache may drop it
    out.policy = v->policy.get();
  }
  return {};
}

AuthOutcome Authenticator::authenticate(const Credentials& c, std::int64_t now_unix, Identity& out,
                                        TokenCache* cache) const {
  out.clear();
  if (c.authorization_count > 1) return {AuthFailure::kRepeated, "repeated-authorization-header"};
  if (c.authorization_count == 1) {
    const std::string_view token = bearer_token(c.authorization);
    if (token.empty()) return {AuthFailure::kMalformed, "malformed-credentials"};
    if (jwt_enabled_ && looks_like_jwt(token)) return check_jwt(token, now_unix, out, cache);
    return check_key(token, now_unix, out);
  }
  if (client_certificate_tenants_ && !c.client_certificate_name.empty()) {
    const std::string_view tenant = certificate_tenant(c.client_certificate_name);
    if (tenant.empty()) return {AuthFailure::kMalformed, "certificate-name-not-a-tenant"};
    out.source = Source::kClientCertificate;
    out.tenant = std::string(tenant);
    out.key_id = "cert";
    settle(out);
    return {};
  }
  return {AuthFailure::kMissing, "missing-credentials"};
}

}  // namespace sluice::auth
