#include "auth/jwt.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "auth/api_keys.h"
#include "auth/crypto.h"
#include "auth/json_members.h"

namespace sluice::auth {

std::string_view to_string(JwtError e) {
  switch (e) {
    case JwtError::kNone:
      return "ok";
    case JwtError::kTooLong:
      return "token-too-long";
    case JwtError::kMalformed:
      return "token-malformed";
    case JwtError::kUnsupportedHeader:
      return "token-unsupported-header";
    case JwtError::kAlgorithmNotAllowed:
      return "token-alg-not-allowed";
    case JwtError::kUnknownKey:
      return "token-unknown-kid";
    case JwtError::kKeyMismatch:
      return "token-key-mismatch";
    case JwtError::kAmbiguousKey:
      return "token-kid-required";
    case JwtError::kBadSignature:
      return "token-bad-signature";
    case JwtError::kExpired:
      return "token-expired";
    case JwtError::kNotYetValid:
      return "token-not-yet-valid";
    case JwtError::kNoExpiry:
      return "token-no-exp";
    case JwtError::kWrongIssuer:
      return "token-wrong-issuer";
    case JwtError::kWrongAudience:
      return "token-wrong-audience";
    case JwtError::kMissingTenant:
      return "token-no-tenant";
    case JwtError::kBadTenant:
      return "token-bad-tenant";
    case JwtError::kBadScope:
      return "token-bad-scope";
    case JwtError::kBadObjective:
      return "token-bad-objective";
    case JwtError::kInternal:
      return "token-internal-error";
  }
  return "token-internal-error";
}

namespace {

// 9999-12-31T23:59:59Z: a later (or negative) time is not a date but a
// number chosen to confuse arithmetic.
constexpr double kMaxNumericDate = 253402300799.0;
constexpr std::int64_t kMaxLeewaySeconds = 366 * 24 * 3600;

// The buffers one I/O thread reuses from token to token (verify_jwt is not
// reentrant on a thread). They grow to at most max_token_bytes each.
struct Scratch {
  simdjson::dom::parser parser;
  std::string header, payload, signature, der;
  std::vector<std::string_view> names;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The same bytes as protocol::is_steering_byte (auth may not import
// protocol; a unit test checks the two agree): RFC 9110 token characters
// plus ':', '/', '@' and '='.
bool is_steering_byte(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kOthers = "!#$%&'*+-.^_`|~:/@=";
  return kOthers.find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_steering_value(std::string_view v) {
  if (v.empty() || v.size() > kMaxClaimBytes) return false;
  for (char c : v)
    if (!is_steering_byte(static_cast<unsigned char>(c))) return false;
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

struct Parts {
  std::string_view header, payload, signature, signing_input;
};

// Exactly three parts, the first two non-empty (a JWE has five).
bool split(std::string_view token, Parts& p) {
  const std::size_t a = token.find('.');
  if (a == std::string_view::npos) return false;
  const std::size_t b = token.find('.', a + 1);
  if (b == std::string_view::npos || token.find('.', b + 1) != std::string_view::npos) return false;
  p.header = token.substr(0, a);
  p.payload = token.substr(a + 1, b - a - 1);
  p.signature = token.substr(b + 1);
  p.signing_input = token.substr(0, b);
  return !p.header.empty() && !p.payload.empty();
}

bool decode(std::string_view part, std::string& out) {
  out.clear();
  // simdjson reads past the end; room for it avoids a copy in parse().
  out.reserve(part.size() * 3 / 4 + simdjson::SIMDJSON_PADDING);
  return base64url_decode(part, out);
}

// A JSON object without a repeated member, or kMalformed.
JwtError parse_object(const std::string& json, Scratch& s, simdjson::dom::object& obj) {
  simdjson::dom::element root;
  if (s.parser.parse(json).get(root) != simdjson::SUCCESS ||
      root.get_object().get(obj) != simdjson::SUCCESS || has_duplicate_member(obj, s.names))
    return JwtError::kMalformed;
  return JwtError::kNone;
}

struct Header {
  JwtAlg alg = JwtAlg::kRS256;
  std::optional<std::string_view> kid;
};

bool typ_is_jwt(std::string_view typ) {
  // RFC 7515 §4.1.9: "application/" may be left out of a media type.
  if (typ.size() > 12 && iequals(typ.substr(0, 12), "application/")) typ.remove_prefix(12);
  return iequals(typ, "JWT") || iequals(typ, "at+jwt");
}

JwtError read_header(const JwtOptions& o, Scratch& s, Header& h) {
  simdjson::dom::object obj;
  if (const auto e = parse_object(s.header, s, obj); e != JwtError::kNone) return e;
  std::optional<std::string_view> alg;
  bool unsupported = false;
  for (const auto field : obj) {
    const std::string_view name = field.key;
    std::string_view value;
    const bool is_string = field.value.get_string().get(value) == simdjson::SUCCESS;
    if (name == "alg" || name == "kid" || name == "typ") {
      if (!is_string) return JwtError::kMalformed;
      if (name == "alg") alg = value;
      if (name == "kid") h.kid = value;
      if (name == "typ" && !typ_is_jwt(value)) unsupported = true;
    }
    // A critical extension sluice would have to understand, or a nested
    // token: neither is supported.
    if (name == "crit" || name == "cty") unsupported = true;
  }
  if (!alg) return JwtError::kMalformed;
  if (unsupported) return JwtError::kUnsupportedHeader;
  const auto parsed = parse_alg(*alg);
  if (!parsed) return JwtError::kAlgorithmNotAllowed;
  for (JwtAlg allowed : o.algorithms) {
    if (allowed != *parsed) continue;
    h.alg = *parsed;
    return JwtError::kNone;
  }
  return JwtError::kAlgorithmNotAllowed;
}

JwtError find_key(const Jwks& keys, const Header& h, const Jwk*& key) {
  switch (keys.find(h.kid, h.alg, key)) {
    case Jwks::Lookup::kFound:
      return JwtError::kNone;
    case Jwks::Lookup::kUnknownKid:
      return JwtError::kUnknownKey;
    case Jwks::Lookup::kMismatch:
      return JwtError::kKeyMismatch;
    case Jwks::Lookup::kAmbiguous:
      return JwtError::kAmbiguousKey;
  }
  return JwtError::kUnknownKey;
}

// JWS ES256 (RFC 7518 §3.4) is r||s, 32 bytes each; OpenSSL verifies DER.
bool ecdsa_raw_to_der(std::string_view raw, std::string& der) {
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (!sig) return false;
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  BIGNUM* r = BN_bin2bn(bytes, 32, nullptr);
  BIGNUM* s = BN_bin2bn(bytes + 32, 32, nullptr);
  if (!r || !s || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return false;
  }
  const int size = i2d_ECDSA_SIG(sig, nullptr);
  bool ok = size > 0;
  if (ok) {
    der.resize(static_cast<std::size_t>(size));
    auto* p = reinterpret_cast<unsigned char*>(der.data());
    ok = i2d_ECDSA_SIG(sig, &p) == size;
  }
  ECDSA_SIG_free(sig);
  return ok;
}

const EVP_MD* sha256_md() {
  // Fetched once: an implicit fetch on every verification costs a lookup.
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

JwtError check_signature(const Jwk& key, JwtAlg alg, std::string_view input, Scratch& s) {
  std::string_view sig = s.signature;
  if (alg == JwtAlg::kES256) {
    if (sig.size() != 64) return JwtError::kBadSignature;
    if (!ecdsa_raw_to_der(sig, s.der)) return JwtError::kInternal;
    sig = s.der;
  } else if (alg == JwtAlg::kEdDSA && sig.size() != 64) {
    return JwtError::kBadSignature;
  } else if (alg == JwtAlg::kRS256 &&
             sig.size() != static_cast<std::size_t>(EVP_PKEY_get_size(key.key.get()))) {
    return JwtError::kBadSignature;
  }
  const EVP_MD* md = alg == JwtAlg::kEdDSA ? nullptr : sha256_md();
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || (alg != JwtAlg::kEdDSA && !md) ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key.key.get()) != 1) {
    ERR_clear_error();
    return JwtError::kInternal;
  }
  const int rc =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size());
  if (rc == 1) return JwtError::kNone;
  ERR_clear_error();
  return JwtError::kBadSignature;
}

// The claims sluice reads, as they are in the payload.
struct Claims {
  std::optional<double> exp, nbf, iat;
  std::optional<std::string_view> iss;
  std::optional<simdjson::dom::element> aud, tenant, objective, models, max_tokens;
};

bool numeric_date(simdjson::dom::element v, std::optional<double>& out) {
  double d = 0;
  if (!v.is_number() || v.get_double().get(d) != simdjson::SUCCESS) return false;
  if (!std::isfinite(d) || d < 0 || d > kMaxNumericDate) return false;
  out = d;
  return true;
}

bool read_claim(std::string_view name, simdjson::dom::element v, Claims& c) {
  if (name == "exp") return numeric_date(v, c.exp);
  if (name == "nbf") return numeric_date(v, c.nbf);
  if (name == "iat") return numeric_date(v, c.iat);
  if (name == "iss") {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return false;
    c.iss = s;
  }
  if (name == "aud") {
    if (!v.is_string() && !v.is_array()) return false;
    c.aud = v;
  }
  return true;
}

JwtError read_claims(const JwtOptions& o, Scratch& s, Claims& c) {
  simdjson::dom::object obj;
  if (const auto e = parse_object(s.payload, s, obj); e != JwtError::kNone) return e;
  for (const auto field : obj) {
    const std::string_view name = field.key;
    if (!read_claim(name, field.value, c)) return JwtError::kMalformed;
    if (!o.tenant_claim.empty() && name == o.tenant_claim) c.tenant = field.value;
    if (!o.objective_claim.empty() && name == o.objective_claim) c.objective = field.value;
    if (!o.models_claim.empty() && name == o.models_claim) c.models = field.value;
    if (!o.max_tokens_claim.empty() && name == o.max_tokens_claim) c.max_tokens = field.value;
  }
  return JwtError::kNone;
}

JwtError check_times(const JwtOptions& o, const Claims& c, std::int64_t now, VerifiedToken& out) {
  // Clamped so that no option value can overflow the sums below.
  const std::int64_t leeway = std::clamp<std::int64_t>(o.leeway_seconds, 0, kMaxLeewaySeconds);
  out.expires_at = 0;
  if (c.exp) {
    // Rounded towards the stricter side: exp down, nbf and iat up.
    out.expires_at = static_cast<std::int64_t>(std::floor(*c.exp));
    if (now >= out.expires_at + leeway) return JwtError::kExpired;
  } else if (o.require_exp) {
    return JwtError::kNoExpiry;
  }
  if (c.nbf && static_cast<std::int64_t>(std::ceil(*c.nbf)) > now + leeway)
    return JwtError::kNotYetValid;
  if (c.iat && static_cast<std::int64_t>(std::ceil(*c.iat)) > now + leeway)
    return JwtError::kNotYetValid;
  return JwtError::kNone;
}

// kNone when the token names one of the configured audiences (or none is
// configured); kMalformed for an array member that is not a string.
JwtError check_audience(const JwtOptions& o, const Claims& c) {
  bool match = false;
  const auto wanted = [&](std::string_view a) {
    for (const auto& w : o.audiences) match = match || w == a;
  };
  std::string_view one;
  simdjson::dom::array many;
  if (c.aud && c.aud->get_string().get(one) == simdjson::SUCCESS) {
    wanted(one);
  } else if (c.aud && c.aud->get_array().get(many) == simdjson::SUCCESS) {
    for (auto v : many) {
      if (v.get_string().get(one) != simdjson::SUCCESS) return JwtError::kMalformed;
      wanted(one);
    }
  }
  if (o.audiences.empty() || match) return JwtError::kNone;
  return JwtError::kWrongAudience;
}

JwtError check_identity(const Claims& c, VerifiedToken& out) {
  std::string_view v;
  if (!c.tenant) return JwtError::kMissingTenant;
  if (c.tenant->get_string().get(v) != simdjson::SUCCESS) return JwtError::kBadTenant;
  if (v.empty()) return JwtError::kMissingTenant;
  if (!is_steering_value(v)) return JwtError::kBadTenant;
  out.tenant.assign(v);
  out.objective.clear();
  if (!c.objective) return JwtError::kNone;
  if (c.objective->get_string().get(v) != simdjson::SUCCESS || !is_steering_value(v))
    return JwtError::kBadObjective;
  out.objective.assign(v);
  return JwtError::kNone;
}

// The token's scope: models as an array of names or a space-separated
// string (each as a key's: auth/api_keys.h), max_tokens a whole number.
JwtError check_scope(const Claims& c, VerifiedToken& out) {
  out.has_models = false;
  out.models.clear();
  out.max_tokens = 0;
  if (c.models) {
    out.has_models = true;
    std::string_view one;
    simdjson::dom::array many;
    if (c.models->get_string().get(one) == simdjson::SUCCESS) {
      for (std::size_t at = 0; at < one.size();) {
        const std::size_t space = std::min(one.find(' ', at), one.size());
        if (space > at) out.models.emplace_back(one.substr(at, space - at));
        at = space + 1;
        if (out.models.size() > kMaxKeyModels) return JwtError::kBadScope;
      }
    } else if (c.models->get_array().get(many) == simdjson::SUCCESS) {
      for (auto v : many) {
        if (v.get_string().get(one) != simdjson::SUCCESS || out.models.size() == kMaxKeyModels)
          return JwtError::kBadScope;
        out.models.emplace_back(one);
      }
    } else {
      return JwtError::kBadScope;
    }
    for (const auto& m : out.models)
      if (!is_valid_key_model(m)) return JwtError::kBadScope;
  }
  if (c.max_tokens) {
    std::uint64_t n = 0;
    if (c.max_tokens->get_uint64().get(n) != simdjson::SUCCESS || n == 0 || n > kMaxKeyMaxTokens)
      return JwtError::kBadScope;
    out.max_tokens = n;
  }
  return JwtError::kNone;
}

JwtError check_claims(const JwtOptions& o, std::int64_t now, Scratch& s, VerifiedToken& out) {
  Claims c;
  if (const auto e = read_claims(o, s, c); e != JwtError::kNone) return e;
  if (const auto e = check_times(o, c, now, out); e != JwtError::kNone) return e;
  if (!o.issuer.empty() && c.iss != o.issuer) return JwtError::kWrongIssuer;
  if (const auto e = check_audience(o, c); e != JwtError::kNone) return e;
  if (const auto e = check_identity(c, out); e != JwtError::kNone) return e;
  return check_scope(c, out);
}

JwtError verify(std::string_view token, const Jwks& keys, const JwtOptions& o, std::int64_t now,
                VerifiedToken& out) {
  // Cheapest first: size, shape, encoding, header, algorithm, key; then the
  // signature; only then the claims.
  if (token.size() > o.max_token_bytes) return JwtError::kTooLong;
  Parts p;
  if (!split(token, p)) return JwtError::kMalformed;
  Scratch& s = scratch();
  if (!decode(p.header, s.header) || !decode(p.payload, s.payload) ||
      !decode(p.signature, s.signature))
    return JwtError::kMalformed;
  Header h;
  if (const auto e = read_header(o, s, h); e != JwtError::kNone) return e;
  const Jwk* key = nullptr;
  if (const auto e = find_key(keys, h, key); e != JwtError::kNone) return e;
  if (const auto e = check_signature(*key, h.alg, p.signing_input, s); e != JwtError::kNone)
    return e;
  out.kid = key->kid;
  out.alg = h.alg;
  return check_claims(o, now, s, out);
}

}  // namespace

JwtError verify_jwt(std::string_view token, const Jwks& keys, const JwtOptions& o,
                    std::int64_t now_unix, VerifiedToken& out) {
  try {
    return verify(token, keys, o, now_unix, out);
  } catch (...) {
    // Only allocation can throw here; the token is not at fault.
    ERR_clear_error();
    return JwtError::kInternal;
  }
}

}  // namespace sluice::auth
