#include "auth/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <simdjson.h>

#include <exception>
#include <utility>

#include "auth/crypto.h"
#include "auth/json_members.h"

namespace sluice::auth {

std::optional<JwtAlg> parse_alg(std::string_view name) {
  if (name == "RS256") return JwtAlg::kRS256;
  if (name == "ES256") return JwtAlg::kES256;
  if (name == "EdDSA") return JwtAlg::kEdDSA;
  return std::nullopt;
}

std::string_view to_string(JwtAlg alg) {
  switch (alg) {
    case JwtAlg::kRS256:
      return "RS256";
    case JwtAlg::kES256:
      return "ES256";
    case JwtAlg::kEdDSA:
      return "EdDSA";
  }
  return "?";
}

bool Jwk::usable_for(JwtAlg a) const {
  if (alg && *alg != a) return false;
  switch (a) {
    case JwtAlg::kRS256:
      return type == KeyType::kRsa;
    case JwtAlg::kES256:
      return type == KeyType::kEcP256;
    case JwtAlg::kEdDSA:
      return type == KeyType::kEd25519;
  }
  return false;
}

namespace {

struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct ParamBldFree {
  void operator()(OSSL_PARAM_BLD* b) const { OSSL_PARAM_BLD_free(b); }
};
struct ParamFree {
  void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
};
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;

// The members of one JWK that sluice reads; all are strings when present.
struct KeyFields {
  std::optional<std::string_view> kty, kid, use, alg, crv, n, e, x, y;
  bool has_key_ops = false, key_ops_verify = false, has_private = false;
};

// A kid as it may appear in a log line: printable ASCII, at most 64 bytes.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out.push_back(c >= 0x20 && c < 0x7f && c != '"' ? c : '?');
  if (s.size() > 64) out += "...";
  return out;
}

bool read_key_ops(simdjson::dom::element v, KeyFields& f) {
  simdjson::dom::array ops;
  if (v.get_array().get(ops) != simdjson::SUCCESS) return false;
  f.has_key_ops = true;
  for (auto op : ops) {
    std::string_view s;
    if (op.get_string().get(s) != simdjson::SUCCESS) return false;
    if (s == "verify") f.key_ops_verify = true;
  }
  return true;
}

// Copies the members sluice reads; false (with `why`) for a member of the
// wrong type.
bool read_fields(const simdjson::dom::object& obj, KeyFields& f, std::string& why) {
  std::pair<std::string_view, std::optional<std::string_view>*> strings[] = {
      {"kty", &f.kty}, {"kid", &f.kid}, {"use", &f.use}, {"alg", &f.alg}, {"crv", &f.crv},
      {"n", &f.n},     {"e", &f.e},     {"x", &f.x},     {"y", &f.y}};
  for (const auto field : obj) {
    const std::string_view name = field.key;
    if (name == "d" || name == "p" || name == "q" || name == "dp" || name == "dq" || name == "qi" ||
        name == "oth" || name == "k")
      f.has_private = true;
    if (name == "key_ops" && !read_key_ops(field.value, f)) {
      why = "\"key_ops\" is not an array of strings";
      return false;
    }
    for (auto& [wanted, slot] : strings) {
      if (name != wanted) continue;
      std::string_view s;
      if (field.value.get_string().get(s) != simdjson::SUCCESS) {
        why = "\"" + std::string(name) + "\" is not a string";
        return false;
      }
      *slot = s;
    }
  }
  return true;
}

// A base64url member of exactly `size` bytes (any size when 0).
bool decode_member(std::optional<std::string_view> v, const char* name, std::size_t size,
                   std::string& out, std::string& why) {
  if (!v) {
    why = std::string("no \"") + name + "\"";
    return false;
  }
  if (!base64url_decode(*v, out) || out.empty()) {
    why = std::string("\"") + name + "\" is not base64url";
    return false;
  }
  if (size != 0 && out.size() != size) {
    why = std::string("\"") + name + "\" is " + std::to_string(out.size()) + " bytes, not " +
          std::to_string(size);
    return false;
  }
  return true;
}

EvpPkeyPtr from_params(const char* type, OSSL_PARAM* params) {
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params) != 1)
    return nullptr;
  return EvpPkeyPtr(key);
}

// RSA (RFC 7518 §6.3.1): modulus and exponent. OpenSSL's own public check
// runs a primality test on n (seconds for big moduli), so the checks here
// are the cheap ones that matter for a verifier: size, odd n, odd e > 1.
EvpPkeyPtr make_rsa(const KeyFields& f, std::string& why) {
  std::string n, e;
  if (!decode_member(f.n, "n", 0, n, why) || !decode_member(f.e, "e", 0, e, why)) return nullptr;
  if (e.size() > 8) {
    why = "RSA exponent over 64 bits";
    return nullptr;
  }
  BnPtr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                       nullptr));
  BnPtr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                       nullptr));
  if (!bn_n || !bn_e) return nullptr;
  const int bits = BN_num_bits(bn_n.get());
  if (bits < kMinRsaBits || bits > kMaxRsaBits) {
    why = "RSA modulus of " + std::to_string(bits) + " bits (2048 to 8192 accepted)";
    return nullptr;
  }
  if (!BN_is_odd(bn_n.get()) || !BN_is_odd(bn_e.get()) || BN_is_one(bn_e.get())) {
    why = "RSA modulus or exponent is not a valid one";
    return nullptr;
  }
  std::unique_ptr<OSSL_PARAM_BLD, ParamBldFree> bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1)
    return nullptr;
  std::unique_ptr<OSSL_PARAM, ParamFree> params(OSSL_PARAM_BLD_to_param(bld.get()));
  if (!params) return nullptr;
  return from_params("RSA", params.get());
}

// EC P-256 (RFC 7518 §6.2.1): both coordinates at their full 32 bytes, and
// the point on the curve (OpenSSL's public key check).
EvpPkeyPtr make_ec(const KeyFields& f, std::string& why) {
  if (f.crv != "P-256") {
    why = "EC curve \"" + printable(f.crv.value_or("")) + "\" (only P-256)";
    return nullptr;
  }
  std::string point = "\x04", y;
  if (!decode_member(f.x, "x", 0, point, why)) return nullptr;
  if (point.size() != 33) {
    why = "\"x\" is not 32 bytes";
    return nullptr;
  }
  if (!decode_member(f.y, "y", 32, y, why)) return nullptr;
  point += y;
  char group[] = "P-256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end()};
  EvpPkeyPtr key = from_params("EC", params);
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> check(
      key ? EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr) : nullptr);
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    why = "EC point is not on P-256";
    return nullptr;
  }
  return key;
}

// OKP Ed25519 (RFC 8037 §2): the 32-byte public key.
EvpPkeyPtr make_okp(const KeyFields& f, std::string& why) {
  if (f.crv != "Ed25519") {
    why = "OKP curve \"" + printable(f.crv.value_or("")) + "\" (only Ed25519)";
    return nullptr;
  }
  std::string x;
  if (!decode_member(f.x, "x", 32, x, why)) return nullptr;
  EvpPkeyPtr key(EVP_PKEY_new_raw_public_key_ex(
      nullptr, "ED25519", nullptr, reinterpret_cast<const unsigned char*>(x.data()), x.size()));
  if (!key) why = "Ed25519 key rejected by OpenSSL";
  return key;
}

// The JWK-level rules before any key material is read.
bool check_metadata(const KeyFields& f, Jwk& jwk, std::string& why) {
  jwk.kid = std::string(f.kid.value_or(""));
  if (f.has_private) {
    why = "holds private key material (a JWKS publishes public keys only)";
    return false;
  }
  if (f.kid && f.kid->size() > kMaxKidBytes) {
    why = "kid longer than 256 bytes";
    return false;
  }
  if (f.use && *f.use != "sig") {
    why = "\"use\" is \"" + printable(*f.use) + "\", not \"sig\"";
    return false;
  }
  if (f.has_key_ops && !f.key_ops_verify) {
    why = "\"key_ops\" without \"verify\"";
    return false;
  }
  if (f.alg) {
    jwk.alg = parse_alg(*f.alg);
    if (!jwk.alg) {
      why = "\"alg\" \"" + printable(*f.alg) + "\" is not accepted (RS256, ES256, EdDSA)";
      return false;
    }
  }
  return true;
}

// One JWK; false with `why` when it is skipped.
bool build_key(const simdjson::dom::element& v, Jwk& jwk, std::string& why,
               std::vector<std::string_view>& names) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    why = "not a JSON object";
    return false;
  }
  if (has_duplicate_member(obj, names)) {
    why = "a member appears twice";
    return false;
  }
  KeyFields f;
  if (!read_fields(obj, f, why) || !check_metadata(f, jwk, why)) return false;
  if (f.kty == "RSA") {
    jwk.type = KeyType::kRsa;
    jwk.key = make_rsa(f, why);
  } else if (f.kty == "EC") {
    jwk.type = KeyType::kEcP256;
    jwk.key = make_ec(f, why);
  } else if (f.kty == "OKP") {
    jwk.type = KeyType::kEd25519;
    jwk.key = make_okp(f, why);
  } else {
    why = "kty \"" + printable(f.kty.value_or("")) + "\" is not supported (RSA, EC, OKP)";
    return false;
  }
  if (!jwk.key) {
    if (why.empty()) why = "OpenSSL refused the key";
    return false;
  }
  if (jwk.alg && !jwk.usable_for(*jwk.alg)) {
    why = "\"alg\" " + std::string(to_string(*jwk.alg)) + " does not fit the key type";
    return false;
  }
  return true;
}

bool same_slot(const Jwk& a, const Jwk& b) { return a.kid == b.kid && a.type == b.type; }

// The "keys" array of the document, or an error.
bool keys_array(const simdjson::dom::element& root, simdjson::dom::array& keys,
                std::string& error) {
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    error = "JWKS is not a JSON object";
    return false;
  }
  std::vector<std::string_view> names;
  if (has_duplicate_member(obj, names)) {
    error = "JWKS has a member twice";
    return false;
  }
  if (obj["keys"].get_array().get(keys) != simdjson::SUCCESS) {
    error = "JWKS has no \"keys\" array";
    return false;
  }
  return true;
}

void read_keys(const simdjson::dom::array& array, std::vector<Jwk>& keys,
               std::vector<std::string>* skipped) {
  std::vector<std::string_view> names;
  std::size_t index = 0;
  for (auto v : array) {
    if (index++ == kMaxJwksKeys) {
      if (skipped)
        skipped->push_back("keys past the first " + std::to_string(kMaxJwksKeys) + " ignored");
      break;
    }
    Jwk jwk;
    std::string why;
    if (build_key(v, jwk, why, names)) {
      bool duplicate = false;
      for (const auto& k : keys) duplicate = duplicate || same_slot(k, jwk);
      if (!duplicate) {
        keys.push_back(std::move(jwk));
        continue;
      }
      why = "the same kid and key type as an earlier key";
    }
    if (skipped)
      skipped->push_back("key " + std::to_string(index - 1) + " (kid \"" + printable(jwk.kid) +
                         "\") skipped: " + why);
  }
}

}  // namespace

std::shared_ptr<const Jwks> Jwks::parse(std::string_view json, std::string& error,
                                        std::vector<std::string>* skipped) {
  try {
    if (json.size() > kMaxJwksBytes) {
      error = "JWKS over " + std::to_string(kMaxJwksBytes) + " bytes";
      return nullptr;
    }
    simdjson::dom::parser parser(kMaxJwksBytes);
    simdjson::dom::element root;
    if (const auto e = parser.parse(json.data(), json.size()).get(root); e != simdjson::SUCCESS) {
      error = std::string("JWKS is not valid JSON: ") + simdjson::error_message(e);
      return nullptr;
    }
    simdjson::dom::array array;
    if (!keys_array(root, array, error)) return nullptr;
    auto jwks = std::make_shared<Jwks>();
    read_keys(array, jwks->keys_, skipped);
    ERR_clear_error();  // refused keys leave OpenSSL's queue for this thread
    return jwks;
  } catch (const std::exception& e) {
    ERR_clear_error();
    error = std::string("JWKS could not be read: ") + e.what();
    return nullptr;
  }
}

Jwks::Lookup Jwks::find(std::optional<std::string_view> kid, JwtAlg alg, const Jwk*& out) const {
  if (kid && !kid->empty()) {
    bool named = false;
    for (const auto& k : keys_) {
      if (k.kid != *kid) continue;
      named = true;
      if (k.usable_for(alg)) {
        out = &k;
        return Lookup::kFound;
      }
    }
    return named ? Lookup::kMismatch : Lookup::kUnknownKid;
  }
  const Jwk* only = nullptr;
  for (const auto& k : keys_) {
    if (!k.usable_for(alg)) continue;
    if (only) return Lookup::kAmbiguous;
    only = &k;
  }
  if (!only) return Lookup::kUnknownKid;
  out = only;
  return Lookup::kFound;
}

}  // namespace sluice::auth
