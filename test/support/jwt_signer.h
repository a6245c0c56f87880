// Making JWTs for tests, benchmarks and fuzzing seeds: keys generated with
// OpenSSL (or read from PEM), their public JWKS, and tokens signed from any
// header and payload bytes, well-formed or not. The hostile-token tests
// build their attacks with it (HS256 keyed by a public key, DER ECDSA
// signatures, unsigned tokens). Test code: throws std::runtime_error when
// OpenSSL fails.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "auth/jwks.h"

namespace sluice::test {

struct SigningKey {
  auth::JwtAlg alg = auth::JwtAlg::kRS256;
  std::string kid;
  auth::EvpPkeyPtr key;  // the private key
};

// A fresh key for `alg`: RSA of `rsa_bits`, EC P-256 or Ed25519.
SigningKey generate_key(auth::JwtAlg alg, std::string kid, int rsa_bits = 2048);
// A fresh key of an EC curve sluice does not accept ("P-384", "secp256k1").
auth::EvpPkeyPtr generate_ec_key(const char* curve);

// A PEM private key (PKCS#8 or traditional); its algorithm follows from the
// key type (RSA: RS256, P-256: ES256, Ed25519: EdDSA). Empty `error` on
// success.
SigningKey load_private_pem(std::string_view pem, std::string kid, std::string& error);
// A PEM public or private key, for its public JWK.
auth::EvpPkeyPtr load_any_pem(std::string_view pem, std::string& error);
std::string private_pem(const EVP_PKEY* key);
std::string public_pem(const EVP_PKEY* key);

// The public JWK of `key` as one JSON object: kty, crv, the key members, a
// "kid" when `kid` is non-empty, then `extra` verbatim (members such as
// "\"use\":\"sig\"" or "\"alg\":\"RS256\"", comma-separated, no braces).
std::string public_jwk(const EVP_PKEY* key, std::string_view kid, std::string_view extra = "");
std::string public_jwk(const SigningKey& key, std::string_view extra = "");
// {"keys":[...]} of the given JWK objects.
std::string jwks_of(const std::vector<std::string>& jwks);
std::string jwks_of(const std::vector<const SigningKey*>& keys);

// The JWS signature of `input` with `key` as the key's algorithm wants it:
// RS256 PKCS#1 v1.5, ES256 raw r||s (64 bytes; `der` gives OpenSSL's DER
// instead, which verifiers must refuse), EdDSA 64 bytes.
std::string sign(const SigningKey& key, std::string_view input, bool der = false);
// HMAC-SHA256 of `input` keyed by `secret` (for the HS256 confusion attack).
std::string hmac_sha256(std::string_view secret, std::string_view input);

// {"alg":"...","typ":"JWT","kid":"..."} for the key (no kid when empty).
std::string default_header(const SigningKey& key);
// base64url(header).base64url(payload).base64url(sign(...)): the header and
// payload are taken as bytes, so malformed JSON is signed as well.
std::string sign_token(const SigningKey& key, std::string_view header_json,
                       std::string_view payload_json, bool der = false);
// sign_token with default_header.
std::string make_token(const SigningKey& key, std::string_view payload_json);

}  // namespace sluice::test
