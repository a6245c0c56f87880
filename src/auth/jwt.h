// Verifying a JSON Web Token (RFC 7519) a client presents as its identity:
// compact JWS only (RFC 7515, three base64url parts; no JWE, no unsecured
// "none"), signed with one of the keys of a Jwks, and the claims sluice
// reads from it (issuer, audience, times, tenant and objective).
//
// Who calls it: an I/O thread, for a token its TokenCache has not seen.
// verify_jwt never throws and never aborts, whatever the bytes; its cost is
// bounded by max_token_bytes and by the work of one signature check, and
// the cheap refusals (size, shape, algorithm, key) come before that check.
// No claim is read before the signature has been checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/jwks.h"

namespace sluice::auth {

struct TenantPolicy;

struct JwtOptions {
  // When non-empty the token's "iss" must be exactly this.
  std::string issuer;
  // When non-empty the token's "aud" (a string or an array of strings) must
  // hold one of these.
  std::vector<std::string> audiences;
  // The algorithms a token may name; each is also bound to its key type.
  std::vector<JwtAlg> algorithms{JwtAlg::kRS256, JwtAlg::kES256, JwtAlg::kEdDSA};
  // Clock skew allowed for "exp", "nbf" and "iat" (taken within [0, a year]).
  std::int64_t leeway_seconds = 60;
  // A top-level string claim whose value is the tenant id (a steering value:
  // kMaxClaimBytes, steering bytes only).
  std::string tenant_claim = "sub";
  // Optional top-level string claim naming the objective; empty: none read.
  std::string objective_claim;
  // Optional claims that narrow the tenant's policy for this token: its
  // models (an array of names, or one space-separated string; exact or
  // `prefix*`, at most 64) and its max_tokens ceiling (a whole number).
  std::string models_claim;
  std::string max_tokens_claim;
  // Longer tokens are refused before any decoding.
  std::size_t max_token_bytes = 8192;
  // A token without "exp" is refused (kNoExpiry).
  bool require_exp = true;
};

// Bound on the tenant and objective claims' values.
inline constexpr std::size_t kMaxClaimBytes = 128;

// Why a token was refused; kNone when it was accepted.
enum class JwtError : std::uint8_t {
  kNone,
  kTooLong,              // over max_token_bytes: nothing was decoded
  kMalformed,            // not three base64url parts; header or claims not a JSON
                         // object, a member twice, a member of the wrong type, a
                         // time that is not a number in [0, year 9999]
  kUnsupportedHeader,    // "crit" or "cty" present, or a "typ" that is not a JWT's
  kAlgorithmNotAllowed,  // "alg" not RS256/ES256/EdDSA, or not in the options
  kUnknownKey,           // no key with this kid (or, without a kid, none for the
                         // alg): the one error a JWKS refetch may cure
  kKeyMismatch,          // the kid names a key of another type or "alg"
  kAmbiguousKey,         // no kid, and several keys fit the alg
  kBadSignature,         // the signature does not verify (or has the wrong size)
  kExpired,              // now >= exp + leeway
  kNotYetValid,          // now + leeway < nbf, or iat in the future past leeway
  kNoExpiry,             // no "exp" and require_exp
  kWrongIssuer,          // "iss" missing or not the configured issuer
  kWrongAudience,        // "aud" missing or naming none of the configured ones
  kMissingTenant,        // the tenant claim is absent or empty
  kBadTenant,            // the tenant claim is not a string, too long, or has a
                         // byte outside the steering set
  kBadObjective,         // the same for the objective claim (when present)
  kBadScope,             // the models or max_tokens claim is not what it must be
  kInternal,             // out of memory or OpenSSL failing: not the token's fault
};

// A short stable reason token for logs, metrics and error bodies, e.g.
// "token-expired".
std::string_view to_string(JwtError e);

// What an accepted token says.
struct VerifiedToken {
  std::string tenant;
  std::string objective;        // empty when the options name no objective
                                // claim or the token has none
  std::int64_t expires_at = 0;  // "exp", unix seconds (rounded down); 0 when
                                // the token has none (require_exp off)
  std::string kid;              // the kid of the key that verified it
  JwtAlg alg = JwtAlg::kRS256;
  // The token's scope (models_claim, max_tokens_claim), when present.
  bool has_models = false;
  std::vector<std::string> models;  // with has_models: may be empty (no model)
  std::uint64_t max_tokens = 0;
  bool scoped() const { return has_models || max_tokens > 0; }
  // A scoped token's policy (its tenant's, narrowed), built once when it is
  // first verified and cached with it (auth/authenticator.cc).
  std::shared_ptr<const TenantPolicy> policy;
};

// Verifies `token` against `keys` and `o` at `now_unix` (seconds). On kNone
// `out` holds the token's identity; on any other result `out` is left in an
// unspecified but valid state. Never throws.
JwtError verify_jwt(std::string_view token, const Jwks& keys, const JwtOptions& o,
                    std::int64_t now_unix, VerifiedToken& out);

}  // namespace sluice::auth
