// Who a request is: its credentials (an API key or a JWT as a bearer
// token, or a verified client certificate) checked against the key store,
// the JWKS and the config, giving the tenant and its policy; or, from a
// trusted proxy, nobody (its steering headers are taken as they are).
//
// Immutable once built; each I/O thread holds a reference, replaced when
// the config, the key file, the fleet's keys or the JWKS change.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/api_keys.h"
#include "auth/jwks.h"
#include "auth/jwt.h"
#include "auth/tenants.h"
#include "auth/token_cache.h"
#include "config/config.h"
#include "config/units.h"

namespace sluice::auth {

enum class Source : std::uint8_t {
  kNone,          // auth is off: the request's steering headers stand
  kTrustedProxy,  // from auth.trustedProxies: its steering headers stand
  kApiKey,
  kJwt,
  kClientCertificate,
};
std::string_view to_string(Source s);

struct Identity {
  Source source = Source::kNone;
  std::string tenant;
  // For logs and metrics: the API key's id, or "jwt:<kid>"; never the key.
  std::string key_id;
  std::string objective;  // the token's objective claim, if configured
  const TenantPolicy* policy = nullptr;
  // A scoped token's policy, which `policy` points to (kept alive here).
  std::shared_ptr<const TenantPolicy> scoped_policy;
  void clear() {
    source = Source::kNone;
    tenant.clear();
    key_id.clear();
    objective.clear();
    policy = nullptr;
    scoped_policy.reset();
  }
};

// What a request brings: its Authorization header(s), and the verified
// client certificate's name, if any.
struct Credentials {
  std::string_view authorization;
  int authorization_count = 0;
  std::string_view client_certificate_name;
};

// Why a request was not authenticated (nothing, if it was).
enum class AuthFailure : std::uint8_t {
  kNone,
  kMissing,       // 401 missing-credentials
  kRepeated,      // 400 repeated-authorization-header
  kMalformed,     // 401 malformed-credentials (not "Bearer <token>")
  kUnknownKey,    // 401 unknown-key
  kExpiredKey,    // 401 key-expired
  kDisabledKey,   // 401 key-disabled
  kInvalidToken,  // 401 token-* (the JWT's reason)
};
struct AuthOutcome {
  AuthFailure failure = AuthFailure::kNone;
  std::string_view reason;  // a stable token for the dropped-reason header and the log
  // A JWT named a key the JWKS does not hold (or none is loaded yet): the
  // caller asks for the JWKS again (rate-limited by whoever fetches it).
  bool unknown_key = false;
  bool ok() const { return failure == AuthFailure::kNone; }
};

class Authenticator {
 public:
  // `keys` may be null (no key file, no fleet store); `jwks` too (no JWT,
  // or not loaded yet).
  Authenticator(const config::Config& c, std::shared_ptr<const KeyStore> keys,
                std::shared_ptr<const Jwks> jwks = nullptr);

  // auth: configured (keys, JWT or client-certificate tenants).
  bool enabled() const { return enabled_; }
  // Steering headers are read only from trusted peers once either auth or
  // trustedProxies is configured.
  bool headers_trusted_by_default() const { return !enabled_ && trusted_.empty(); }
  // `address`: the peer's, 16 bytes (IPv4 mapped).
  bool trusted(const std::array<unsigned char, 16>& address) const;

  // `cache`: the calling thread's verified JWTs (may be null).
  AuthOutcome authenticate(const Credentials& c, std::int64_t now_unix, Identity& out,
                           TokenCache* cache = nullptr) const;

  // The tenant whose tenants[].certificateNames hold a verified client
  // certificate's name (its first URI, DNS or email SAN, else its subject
  // CN): an exact entry, else a "URI/*" one whose last path segment is one
  // SPIFFE path segment; "" for any other name. A name is never cut down
  // to a tenant id.
  std::string_view certificate_tenant(std::string_view name) const;

  const Tenants& tenants() const { return tenants_; }
  const KeyStore* keys() const { return keys_.get(); }
  std::shared_ptr<const KeyStore> shared_keys() const { return keys_; }
  const std::string& realm() const { return realm_; }

 private:
  AuthOutcome check_key(std::string_view key, std::int64_t now_unix, Identity& out) const;
  AuthOutcome check_jwt(std::string_view token, std::int64_t now_unix, Identity& out,
                        TokenCache* cache) const;
  void settle(Identity& out) const;

  bool enabled_ = false;
  bool client_certificate_tenants_ = false;
  std::vector<config::Cidr> trusted_;
  std::shared_ptr<const KeyStore> keys_;
  bool jwt_enabled_ = false;
  JwtOptions jwt_;
  std::shared_ptr<const Jwks> jwks_;
  Tenants tenants_;
  // Scoped keys' policies (their tenant's, narrowed), built with the
  // authenticator: a request with such a key costs one more lookup.
  std::unordered_map<const KeyRecord*, TenantPolicy> scoped_;
  // tenants[].certificateNames: exact names, and "URI/*" entries by their
  // prefix (the entry without its '*'), each to its tenant.
  std::unordered_map<std::string, std::string> certificate_names_;
  std::vector<std::pair<std::string, std::string>> certificate_prefixes_;
  std::string realm_;
};

// A compact JWS: three base64url parts (what is not one is an API key).
bool looks_like_jwt(std::string_view token);

// The token of "Bearer <token>" (scheme case-insensitive, spaces after it),
// or empty if the header is not that.
std::string_view bearer_token(std::string_view authorization);

}  // namespace sluice::auth
