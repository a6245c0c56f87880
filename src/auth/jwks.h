// The keys JWTs are verified with: a JSON Web Key Set (RFC 7517) read into
// OpenSSL public keys, and the three signature algorithms sluice accepts.
//
// Who calls it: a background thread builds a Jwks from the document it
// fetched (parse) and publishes it as shared_ptr<const Jwks>; the I/O threads
// look keys up (find) and verify with them concurrently. A built Jwks is
// immutable, and verifying with one EVP_PKEY from several threads, each with
// its own EVP_MD_CTX, is safe in OpenSSL 3.
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::auth {

// The only signature algorithms a token may name. There is deliberately no
// "none", no HMAC (HS*: a verifier holding public keys must never treat one
// as a shared secret) and no PS*/ES384/ES512.
enum class JwtAlg : std::uint8_t { kRS256, kES256, kEdDSA };

// "RS256", "ES256" or "EdDSA" (exact, case-sensitive as RFC 7518 spells
// them); nothing else.
std::optional<JwtAlg> parse_alg(std::string_view name);
std::string_view to_string(JwtAlg alg);

// What a key is; each algorithm verifies with exactly one kind.
enum class KeyType : std::uint8_t { kRsa, kEcP256, kEd25519 };

struct EvpPkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

// One usable verification key of a set.
struct Jwk {
  std::string kid;  // empty when the JWK has none
  KeyType type = KeyType::kRsa;
  std::optional<JwtAlg> alg;  // the JWK's "alg" when it has one
  EvpPkeyPtr key;

  // True when a token naming `a` may be verified with this key: the key's
  // type is the algorithm's (RS256-RSA, ES256-P-256, EdDSA-Ed25519) and the
  // JWK's own "alg", if any, is `a`.
  bool usable_for(JwtAlg a) const;
};

// Limits of a document: past kMaxJwksBytes it is an error; key entries past
// kMaxJwksKeys are skipped (with one reason).
inline constexpr std::size_t kMaxJwksBytes = 1 << 20;
inline constexpr std::size_t kMaxJwksKeys = 256;
// Longer kids are skipped: a kid is copied into every cached token.
inline constexpr std::size_t kMaxKidBytes = 256;
// RSA moduli accepted: at least 2048 bits (weaker keys are skipped), at most
// 8192 (a bound on what one verification can cost).
inline constexpr int kMinRsaBits = 2048;
inline constexpr int kMaxRsaBits = 8192;

class Jwks {
 public:
  // Reads a JWKS document: {"keys": [JWK, ...]}. Returns nullptr with
  // `error` set when the document is over kMaxJwksBytes, is not JSON, is not
  // an object with exactly one "keys" array. A key that is malformed or not
  // supported (another kty or curve, RSA under 2048 bits, an EC point off
  // the curve, "use" other than "sig", "key_ops" without "verify", an "alg"
  // sluice does not accept or that does not fit the key, private key
  // material, a duplicate member, a kid longer than kMaxKidBytes, the same
  // kid twice for one key type) is skipped; when `skipped` is given, one
  // line per skipped key is appended to it (printable ASCII, fit for a log
  // line). A set with no usable key is not an error (size() is 0).
  // Never throws; meant for a background thread (RSA checks cost a little).
  static std::shared_ptr<const Jwks> parse(std::string_view json, std::string& error,
                                           std::vector<std::string>* skipped = nullptr);

  enum class Lookup : std::uint8_t {
    kFound,
    kUnknownKid,  // no key has this kid, or (without a kid) none is usable
    kMismatch,    // keys with this kid exist, none is usable for the alg
    kAmbiguous,   // no kid, and several keys are usable for the alg
  };
  // The key for a token's header: with a non-empty `kid`, the key of that
  // kid usable for `alg`; with none (or an empty one), the only key of the
  // set usable for `alg`. `out` is set only with kFound. Thread-safe.
  Lookup find(std::optional<std::string_view> kid, JwtAlg alg, const Jwk*& out) const;

  std::size_t size() const { return keys_.size(); }
  const std::vector<Jwk>& keys() const { return keys_; }

 private:
  std::vector<Jwk> keys_;
};

}  // namespace sluice::auth
