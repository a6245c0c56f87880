#include "support/jwt_signer.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <memory>
#include <stdexcept>

#include "auth/crypto.h"

namespace sluice::test {

namespace {

[[noreturn]] void fail(const std::string& what) {
  char buf[256] = "";
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error("jwt_signer: " + what + ": " + buf);
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;

BioPtr memory_bio(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) fail("BIO_new_mem_buf");
  return bio;
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string bn_bytes(const EVP_PKEY* key, const char* name, int pad) {
  BIGNUM* raw = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &raw) != 1) fail(std::string("get ") + name);
  BnPtr bn(raw);
  std::string out(pad > 0 ? static_cast<std::size_t>(pad) : BN_num_bytes(bn.get()), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  if (pad > 0 ? BN_bn2binpad(bn.get(), p, pad) != pad : BN_bn2bin(bn.get(), p) < 0)
    fail(std::string("bn2bin ") + name);
  return out;
}

std::string member(std::string_view name, std::string_view bytes) {
  return "\"" + std::string(name) + "\":\"" + auth::base64url_encode(bytes) + "\"";
}

auth::JwtAlg alg_of(const EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "RSA")) return auth::JwtAlg::kRS256;
  if (EVP_PKEY_is_a(key, "ED25519")) return auth::JwtAlg::kEdDSA;
  if (EVP_PKEY_is_a(key, "EC")) return auth::JwtAlg::kES256;
  throw std::runtime_error("jwt_signer: a key type sluice does not verify");
}

std::string der_to_raw(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  if (!sig) fail("d2i_ECDSA_SIG");
  std::string raw(64, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  const bool ok = BN_bn2binpad(ECDSA_SIG_get0_r(sig), out, 32) == 32 &&
                  BN_bn2binpad(ECDSA_SIG_get0_s(sig), out + 32, 32) == 32;
  ECDSA_SIG_free(sig);
  if (!ok) fail("ECDSA r or s over 32 bytes");
  return raw;
}

}  // namespace

SigningKey generate_key(auth::JwtAlg alg, std::string kid, int rsa_bits) {
  EVP_PKEY* key = nullptr;
  switch (alg) {
    case auth::JwtAlg::kRS256:
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(rsa_bits));
      break;
    case auth::JwtAlg::kES256:
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
      break;
    case auth::JwtAlg::kEdDSA:
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
      break;
  }
  if (!key) fail("EVP_PKEY_Q_keygen");
  return SigningKey{alg, std::move(kid), auth::EvpPkeyPtr(key)};
}

auth::EvpPkeyPtr generate_ec_key(const char* curve) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve);
  if (!key) fail(std::string("EVP_PKEY_Q_keygen EC ") + curve);
  return auth::EvpPkeyPtr(key);
}

SigningKey load_private_pem(std::string_view pem, std::string kid, std::string& error) {
  error.clear();
  BioPtr bio = memory_bio(pem);
  auth::EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) {
    error = "not a PEM private key";
    return {};
  }
  try {
    const auth::JwtAlg alg = alg_of(key.get());
    return SigningKey{alg, std::move(kid), std::move(key)};
  } catch (const std::exception& e) {
    error = e.what();
    return {};
  }
}

auth::EvpPkeyPtr load_any_pem(std::string_view pem, std::string& error) {
  error.clear();
  BioPtr bio = memory_bio(pem);
  auth::EvpPkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    bio = memory_bio(pem);
    key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  }
  ERR_clear_error();
  if (!key) error = "not a PEM public or private key";
  return key;
}

std::string private_pem(const EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    fail("PEM_write_bio_PrivateKey");
  return bio_text(bio.get());
}

std::string public_pem(const EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) fail("PEM_write_bio_PUBKEY");
  return bio_text(bio.get());
}

std::string public_jwk(const EVP_PKEY* key, std::string_view kid, std::string_view extra) {
  std::string jwk = "{";
  if (EVP_PKEY_is_a(key, "RSA")) {
    jwk += "\"kty\":\"RSA\"," + member("n", bn_bytes(key, OSSL_PKEY_PARAM_RSA_N, 0)) + "," +
           member("e", bn_bytes(key, OSSL_PKEY_PARAM_RSA_E, 0));
  } else if (EVP_PKEY_is_a(key, "ED25519")) {
    std::string x(32, '\0');
    std::size_t n = x.size();
    if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(x.data()), &n) != 1)
      fail("EVP_PKEY_get_raw_public_key");
    jwk += "\"kty\":\"OKP\",\"crv\":\"Ed25519\"," + member("x", x);
  } else if (EVP_PKEY_is_a(key, "EC")) {
    char group[64] = "";
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                       nullptr) != 1)
      fail("EC group name");
    const std::string name = group;
    const std::string crv = name == "prime256v1" ? "P-256" : name == "secp384r1" ? "P-384" : name;
    const int size = crv == "P-384" ? 48 : 32;
    jwk += "\"kty\":\"EC\",\"crv\":\"" + crv + "\"," +
           member("x", bn_bytes(key, OSSL_PKEY_PARAM_EC_PUB_X, size)) + "," +
           member("y", bn_bytes(key, OSSL_PKEY_PARAM_EC_PUB_Y, size));
  } else {
    throw std::runtime_error("jwt_signer: a key type with no JWK here");
  }
  if (!kid.empty()) jwk += ",\"kid\":\"" + std::string(kid) + "\"";
  if (!extra.empty()) jwk += "," + std::string(extra);
  return jwk + "}";
}

std::string public_jwk(const SigningKey& key, std::string_view extra) {
  return public_jwk(key.key.get(), key.kid, extra);
}

std::string jwks_of(const std::vector<std::string>& jwks) {
  std::string out = "{\"keys\":[";
  for (std::size_t i = 0; i < jwks.size(); ++i) out += (i ? "," : "") + jwks[i];
  return out + "]}";
}

std::string jwks_of(const std::vector<const SigningKey*>& keys) {
  std::vector<std::string> jwks;
  for (const auto* k : keys) jwks.push_back(public_jwk(*k));
  return jwks_of(jwks);
}

std::string sign(const SigningKey& key, std::string_view input, bool der) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  const EVP_MD* md = key.alg == auth::JwtAlg::kEdDSA ? nullptr : EVP_sha256();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key.key.get()) != 1)
    fail("EVP_DigestSignInit");
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  std::size_t n = 0;
  if (EVP_DigestSign(ctx.get(), nullptr, &n, in, input.size()) != 1) fail("EVP_DigestSign size");
  std::string sig(n, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &n, in,
                     input.size()) != 1)
    fail("EVP_DigestSign");
  sig.resize(n);
  if (key.alg == auth::JwtAlg::kES256 && !der) return der_to_raw(sig);
  return sig;
}

std::string hmac_sha256(std::string_view secret, std::string_view input) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(input.data()), input.size(), out, &n))
    fail("HMAC");
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string default_header(const SigningKey& key) {
  std::string h = "{\"alg\":\"" + std::string(auth::to_string(key.alg)) + "\",\"typ\":\"JWT\"";
  if (!key.kid.empty()) h += ",\"kid\":\"" + key.kid + "\"";
  return h + "}";
}

std::string sign_token(const SigningKey& key, std::string_view header_json,
                       std::string_view payload_json, bool der) {
  const std::string input =
      auth::base64url_encode(header_json) + "." + auth::base64url_encode(payload_json);
  return input + "." + auth::base64url_encode(sign(key, input, der));
}

std::string make_token(const SigningKey& key, std::string_view payload_json) {
  return sign_token(key, default_header(key), payload_json);
}

}  // namespace sluice::test
