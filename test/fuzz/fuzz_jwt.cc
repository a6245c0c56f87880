// JWT verification (auth/jwt.h) on any bytes, against a fixed key set.
// Byte 0 picks the mode and the options; the rest is:
//   mode 0, 1: a token, verified as it is (what a client sends);
//   mode 2, 3: header JSON, a newline, payload JSON, signed here with the
//              fixed EdDSA (2) or ES256 (3) private key, so the fuzzer
//              reaches the claims behind a valid signature.
// Byte 0's upper bits: 0x04 audiences configured, 0x08 an objective claim,
// 0x10 exp not required, 0x20 the tenant claim is "tid", 0x40 leeway 0.
// Oracles: nothing throws, nothing aborts; no kInternal; the same token gives
// the same answer twice (the thread's reused buffers keep no state); an
// accepted token's tenant and objective are steering values of at most 128
// bytes and its kid is a key of the set that fits its alg; a TokenCache then
// holds it until its exp.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "auth/api_keys.h"
#include "auth/crypto.h"
#include "auth/jwks.h"
#include "auth/jwt.h"
#include "auth/token_cache.h"
#include "finding.h"

namespace {

using sluice::auth::JwtAlg;
using sluice::auth::JwtError;

constexpr std::int64_t kNow = 1'700'000'000;

// Public keys of the seed tokens (test/fuzz/corpus/fuzz_jwt), kids fuzz-rsa,
// fuzz-ec and fuzz-ed.
constexpr const char* kJwks =
    R"({"keys":[{"kty":"RSA","n":"zNPTAwPnthqzdlfknatGvI2nsp3voOJU-oeoFlM3zFXLzTzptx4EO1HtTdqNCJ7ue6SZiUZe6BJMcHaRG4XKKgRicva8CWxxawgPTkd4V7WhvtTDA7kH_EdAYOPq-kD64sBng9xXhwNuinR0NDuxF9x9omQcFLpwp7Y564JGCyS0WYf-kbVCWAAYxvjlj1C5XQKxux_gC4VPaTrrjnWvwIDSal3HE4V2NXHk2hswKqnHC9srLTCIO0NLaLa5VE8jLrJJsGxE9X4cDGbTeEIQs_L84NOsEcEyXXmd_ku2ZT1Rm17F8JQoUDmJRQxtebfBfnDZTWuaw8ywUZu0fxZFGw","e":"AQAB","kid":"fuzz-rsa"},{"kty":"EC","crv":"P-256","x":"m7U3KyaPXT8n6YJlt1Kgo2QgC-C4a68LNyIi-cMc9cI","y":"F_8uZjlKWX66l9OWHMlPZd62G3lhZ9HkumAsWI391wE","kid":"fuzz-ec"},{"kty":"OKP","crv":"Ed25519","x":"Gv0ajLoYhmIN58JloV8Mzd2l-4dUyrQdScf_rMDXrGE","kid":"fuzz-ed"}]})";
// The private halves of fuzz-ec (the P-256 scalar) and fuzz-ed (the
// Ed25519 seed): test keys, nothing else uses them. fuzz-rsa's is not
// needed: RSA signing here would be slow.
constexpr const char* kEcPrivateHex =
    "593058e3d03f268cd27cfb0ca2ecf9340798348aa8e8782fea6a8c6698f172c8";
constexpr const char* kEdSeedHex =
    "82aa95fd1f2cca12dd32c8689f6c37c7bb173c910b9c67c529af7f3af8694b47";

[[noreturn]] void violation(const char* what, std::string_view token) {
  std::fprintf(stderr, "FINDING: %s\ntoken: %.300s\n", what, std::string(token).c_str());
  std::abort();
}

const sluice::auth::Jwks& keys() {
  static const auto set = [] {
    std::string error;
    auto s = sluice::auth::Jwks::parse(kJwks, error);
    if (!s || s->size() != 3) {
      std::fprintf(stderr, "fuzz_jwt: the fixed JWKS does not load: %s\n", error.c_str());
      std::abort();
    }
    return s;
  }();
  return *set;
}

sluice::auth::Digest bytes_of(const char* hex) {
  sluice::auth::Digest d{};
  if (!sluice::auth::from_hex(hex, d)) std::abort();
  return d;
}

EVP_PKEY* ed_key() {
  const auto seed = bytes_of(kEdSeedHex);
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key_ex(nullptr, "ED25519", nullptr, seed.data(), 32);
  if (!key) std::abort();
  return key;
}

// The P-256 key from its scalar and the public point of the JWKS.
EVP_PKEY* ec_key() {
  const auto priv = bytes_of(kEcPrivateHex);
  BIGNUM* d = BN_bin2bn(priv.data(), 32, nullptr);
  const sluice::auth::Jwk* jwk = nullptr;
  std::string point;
  if (keys().find("fuzz-ec", JwtAlg::kES256, jwk) != sluice::auth::Jwks::Lookup::kFound)
    std::abort();
  std::size_t n = 0;
  EVP_PKEY_get_octet_string_param(jwk->key.get(), OSSL_PKEY_PARAM_PUB_KEY, nullptr, 0, &n);
  point.resize(n);
  EVP_PKEY_get_octet_string_param(jwk->key.get(), OSSL_PKEY_PARAM_PUB_KEY,
                                  reinterpret_cast<unsigned char*>(point.data()), n, &n);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0);
  OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d);
  OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size());
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
      EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_KEYPAIR, params) != 1)
    std::abort();
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  BN_free(d);
  return key;
}

// A JWS signature: raw r||s for ES256 (from OpenSSL's DER), 64 bytes for
// EdDSA.
std::string sign(EVP_PKEY* key, bool ecdsa, const std::string& input) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig(80, '\0');
  std::size_t n = sig.size();
  if (EVP_DigestSignInit(ctx, nullptr, ecdsa ? EVP_sha256() : nullptr, nullptr, key) != 1 ||
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &n,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1)
    std::abort();
  EVP_MD_CTX_free(ctx);
  sig.resize(n);
  if (!ecdsa) return sig;
  const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
  ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
  std::string raw(64, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  BN_bn2binpad(ECDSA_SIG_get0_r(es), out, 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(es), out + 32, 32);
  ECDSA_SIG_free(es);
  return raw;
}

std::string signed_token(std::string_view input, bool ecdsa) {
  static EVP_PKEY* const ec = ec_key();
  static EVP_PKEY* const ed = ed_key();
  const std::size_t nl = input.find('\n');
  const std::string_view header = input.substr(0, nl);
  const std::string_view payload = nl == std::string_view::npos ? "" : input.substr(nl + 1);
  const std::string signing_input =
      sluice::auth::base64url_encode(header) + "." + sluice::auth::base64url_encode(payload);
  return signing_input + "." +
         sluice::auth::base64url_encode(sign(ecdsa ? ec : ed, ecdsa, signing_input));
}

sluice::auth::JwtOptions options_of(std::uint8_t b) {
  sluice::auth::JwtOptions o;
  o.issuer = "https://issuer.example";
  if (b & 0x04) o.audiences = {"sluice", "other"};
  if (b & 0x08) o.objective_claim = "objective";
  if (b & 0x10) o.require_exp = false;
  if (b & 0x20) o.tenant_claim = "tid";
  if (b & 0x40) o.leeway_seconds = 0;
  if (b & 0x80) {
    o.models_claim = "models";
    o.max_tokens_claim = "max_tokens";
  }
  return o;
}

// The documented set (protocol/steering.h), written out again here.
bool steering(std::string_view v, bool may_be_empty) {
  if (v.empty()) return may_be_empty;
  if (v.size() > sluice::auth::kMaxClaimBytes) return false;
  constexpr std::string_view kAllowed =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~:/@=";
  return v.find_first_not_of(kAllowed) == std::string_view::npos;
}

void check_accepted(std::string_view token, const sluice::auth::VerifiedToken& out) {
  if (!steering(out.tenant, false)) violation("an accepted tenant is not a steering value", token);
  if (!steering(out.objective, true)) violation("an accepted objective is not one", token);
  if (out.models.size() > sluice::auth::kMaxKeyModels) violation("more than 64 models", token);
  for (const auto& m : out.models)
    if (!sluice::auth::is_valid_key_model(m)) violation("an accepted model is not one", token);
  if (out.max_tokens > sluice::auth::kMaxKeyMaxTokens)
    violation("max_tokens past the bound", token);
  const sluice::auth::Jwk* key = nullptr;
  if (keys().find(out.kid, out.alg, key) != sluice::auth::Jwks::Lookup::kFound)
    violation("accepted with a kid that is not a key for its alg", token);
  sluice::auth::TokenCache cache(4);
  const auto digest = sluice::auth::TokenCache::key_of(token);
  cache.insert(digest, out, kNow);
  const auto* hit = cache.find(digest, kNow);
  if (out.expires_at > kNow && (!hit || hit->tenant != out.tenant))
    violation("the cache lost a token it was given", token);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const int mode = data[0] % 4;
    const std::string token = mode < 2 ? std::string(input) : signed_token(input, mode == 3);
    const auto o = options_of(data[0]);
    sluice::auth::VerifiedToken out, again;
    const JwtError e = sluice::auth::verify_jwt(token, keys(), o, kNow, out);
    if (e == JwtError::kInternal) violation("kInternal on a token", token);
    if (sluice::auth::verify_jwt(token, keys(), o, kNow, again) != e)
      violation("the same token verified two ways", token);
    if (e == JwtError::kNone) check_accepted(token, out);
    if (sluice::auth::to_string(e).empty()) violation("an error without a reason", token);
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("verify_jwt", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("verify_jwt");
  }
  return 0;
}
