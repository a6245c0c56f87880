// verify_jwt against the hostile tokens a client may send: each refusal is
// checked for its exact JwtError. Keys are generated once per run.
#include "auth/jwt.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "auth/crypto.h"
#include "protocol/steering.h"
#include "support/jwt_signer.h"

namespace sluice::auth {
namespace {

using test::SigningKey;

constexpr std::int64_t kNow = 1'700'000'000;
constexpr const char* kIssuer = "https://issuer.example";

// A payload as ordered members with raw JSON values, so a test can change
// or drop one without writing it twice (a repeated member is its own test).
struct Claims {
  std::vector<std::pair<std::string, std::string>> members;

  Claims& set(const std::string& name, const std::string& raw) {
    for (auto& [k, v] : members)
      if (k == name) {
        v = raw;
        return *this;
      }
    members.emplace_back(name, raw);
    return *this;
  }
  Claims& erase(const std::string& name) {
    std::erase_if(members, [&](const auto& m) { return m.first == name; });
    return *this;
  }
  std::string json() const {
    std::string s = "{";
    for (const auto& [k, v] : members) s += (s.size() > 1 ? "," : "") + ("\"" + k + "\":" + v);
    return s + "}";
  }
};

std::string quoted(const std::string& s) { return "\"" + s + "\""; }
std::string num(std::int64_t n) { return std::to_string(n); }

Claims good_claims() {
  Claims c;
  c.set("iss", quoted(kIssuer))
      .set("aud", quoted("sluice"))
      .set("sub", quoted("tenant-a"))
      .set("objective", quoted("chat"))
      .set("iat", num(kNow - 10))
      .set("nbf", num(kNow - 10))
      .set("exp", num(kNow + 600));
  return c;
}

// The token's parts, changed one at a time.
std::vector<std::string> parts_of(const std::string& token) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = token.find('.', start);
    parts.push_back(token.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? "." : "") + parts[i];
  return s;
}

// The token with one bit of one part's decoded bytes flipped.
std::string flip_bit(const std::string& token, int part, std::size_t byte, std::uint8_t mask) {
  auto parts = parts_of(token);
  std::string raw;
  EXPECT_TRUE(base64url_decode(parts[part], raw));
  raw[byte % raw.size()] = static_cast<char>(raw[byte % raw.size()] ^ mask);
  parts[part] = base64url_encode(raw);
  return join(parts);
}

class Jwt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kRS256, "rsa-1"));
    ec_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kES256, "ec-1"));
    ed_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kEdDSA, "ed-1"));
    std::string error;
    jwks_ = Jwks::parse(test::jwks_of({rsa_.get(), ec_.get(), ed_.get()}), error);
    ASSERT_TRUE(jwks_) << error;
    ASSERT_EQ(jwks_->size(), 3u);
  }
  static void TearDownTestSuite() {
    jwks_.reset();
    rsa_.reset();
    ec_.reset();
    ed_.reset();
  }

  static JwtOptions options() {
    JwtOptions o;
    o.issuer = kIssuer;
    o.audiences = {"other", "sluice"};
    o.objective_claim = "objective";
    return o;
  }

  JwtError verify(const std::string& token) { return verify_jwt(token, *jwks_, opts_, kNow, out_); }
  JwtError verify_claims(const Claims& c, const SigningKey& key) {
    return verify(test::make_token(key, c.json()));
  }
  JwtError verify_header(const std::string& header, const SigningKey& key) {
    return verify(test::sign_token(key, header, good_claims().json()));
  }

  static inline std::unique_ptr<SigningKey> rsa_, ec_, ed_;
  static inline std::shared_ptr<const Jwks> jwks_;
  JwtOptions opts_ = options();
  VerifiedToken out_;
};

// --- accepted tokens ---

TEST_F(Jwt, AcceptsEachAlgorithmAndReadsItsIdentity) {
  for (const SigningKey* key : {rsa_.get(), ec_.get(), ed_.get()}) {
    SCOPED_TRACE(std::string(to_string(key->alg)));
    out_ = {};
    ASSERT_EQ(verify_claims(good_claims(), *key), JwtError::kNone);
    EXPECT_EQ(out_.tenant, "tenant-a");
    EXPECT_EQ(out_.objective, "chat");
    EXPECT_EQ(out_.expires_at, kNow + 600);
    EXPECT_EQ(out_.kid, key->kid);
    EXPECT_EQ(out_.alg, key->alg);
  }
}

TEST_F(Jwt, Es256RawSignaturesOfEverySizeOfRAndSVerify) {
  // r or s with leading zero bytes (DER drops them) and with the top bit
  // set (DER adds a zero): 400 signatures meet both with near certainty.
  for (int i = 0; i < 400; ++i)
    ASSERT_EQ(verify_claims(good_claims().set("jti", num(i)), *ec_), JwtError::kNone) << i;
}

TEST_F(Jwt, AcceptsWithoutOptionalMembersAndOptions) {
  opts_.issuer.clear();
  opts_.audiences.clear();
  opts_.objective_claim.clear();
  Claims c;
  c.set("sub", quoted("t")).set("exp", num(kNow + 1));
  ASSERT_EQ(verify_claims(c, *ed_), JwtError::kNone);
  EXPECT_EQ(out_.tenant, "t");
  EXPECT_EQ(out_.objective, "");
}

TEST_F(Jwt, AcceptsFractionalTimesRoundedToTheStricterSide) {
  ASSERT_EQ(verify_claims(good_claims().set("exp", "1700000100.9"), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.expires_at, kNow + 100);
  opts_.leeway_seconds = 0;
  EXPECT_EQ(verify_claims(good_claims().set("nbf", "1700000000.1"), *ed_), JwtError::kNotYetValid);
  EXPECT_EQ(verify_claims(good_claims().set("nbf", "1700000000.0"), *ed_), JwtError::kNone);
}

TEST_F(Jwt, TypMayBeJwtOrAccessTokenInAnyCase) {
  for (const char* typ :
       {"JWT", "jwt", "at+jwt", "AT+JWT", "application/at+jwt", "application/JWT"})
    EXPECT_EQ(
        verify_header(R"({"alg":"EdDSA","kid":"ed-1","typ":")" + std::string(typ) + "\"}", *ed_),
        JwtError::kNone)
        << typ;
  EXPECT_EQ(verify_header(R"({"alg":"EdDSA","kid":"ed-1"})", *ed_), JwtError::kNone);
}

// --- algorithm confusion ---

TEST_F(Jwt, AlgNoneIsRefusedWithOrWithoutASignature) {
  const std::string unsigned_input = base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." +
                                     base64url_encode(good_claims().json());
  EXPECT_EQ(verify(unsigned_input + "."), JwtError::kAlgorithmNotAllowed);
  EXPECT_EQ(verify(unsigned_input), JwtError::kMalformed);  // two parts
  const std::string signature = base64url_encode(test::sign(*rsa_, unsigned_input));
  EXPECT_EQ(verify(unsigned_input + "." + signature), JwtError::kAlgorithmNotAllowed);
  for (const char* alg : {"None", "NONE", "nOnE"})
    EXPECT_EQ(verify_header(R"({"alg":")" + std::string(alg) + R"(","kid":"rsa-1"})", *rsa_),
              JwtError::kAlgorithmNotAllowed)
        << alg;
}

TEST_F(Jwt, Hs256KeyedByTheRsaPublicKeyIsRefused) {
  const std::string input = base64url_encode(R"({"alg":"HS256","typ":"JWT","kid":"rsa-1"})") + "." +
                            base64url_encode(good_claims().json());
  std::string n;
  const std::string jwk = test::public_jwk(*rsa_);
  const std::size_t at = jwk.find("\"n\":\"") + 5;
  const std::string n_b64 = jwk.substr(at, jwk.find('"', at) - at);
  ASSERT_TRUE(base64url_decode(n_b64, n));
  for (const std::string& secret : {test::public_pem(rsa_->key.get()), n, n_b64}) {
    const std::string token = input + "." + base64url_encode(test::hmac_sha256(secret, input));
    EXPECT_EQ(verify(token), JwtError::kAlgorithmNotAllowed);
    // The same MAC under a header that names RS256 is only a bad signature.
    const std::string relabelled =
        base64url_encode(R"({"alg":"RS256","typ":"JWT","kid":"rsa-1"})") + "." +
        base64url_encode(good_claims().json());
    EXPECT_EQ(verify(relabelled + "." + base64url_encode(test::hmac_sha256(secret, relabelled))),
              JwtError::kBadSignature);
  }
}

TEST_F(Jwt, AlgorithmsOutsideTheThreeAreRefused) {
  for (const char* alg : {"HS256", "HS512", "PS256", "RS384", "RS512", "ES384", "ES512", "ES256K",
                          "Ed25519", "rs256", "RS256 ", ""})
    EXPECT_EQ(verify_header(R"({"alg":")" + std::string(alg) + R"(","kid":"rsa-1"})", *rsa_),
              JwtError::kAlgorithmNotAllowed)
        << alg;
}

TEST_F(Jwt, AnAlgorithmLeftOutOfTheOptionsIsRefused) {
  opts_.algorithms = {JwtAlg::kES256, JwtAlg::kEdDSA};
  EXPECT_EQ(verify_claims(good_claims(), *rsa_), JwtError::kAlgorithmNotAllowed);
  EXPECT_EQ(verify_claims(good_claims(), *ec_), JwtError::kNone);
  opts_.algorithms.clear();
  EXPECT_EQ(verify_claims(good_claims(), *ed_), JwtError::kAlgorithmNotAllowed);
}

TEST_F(Jwt, AnAllowedAlgorithmWithAnotherTypesKeyIsRefused) {
  // RS256 naming the EC key, ES256 naming the RSA key, EdDSA naming the EC key.
  EXPECT_EQ(verify_header(R"({"alg":"RS256","kid":"ec-1"})", *rsa_), JwtError::kKeyMismatch);
  EXPECT_EQ(verify_header(R"({"alg":"ES256","kid":"rsa-1"})", *ec_), JwtError::kKeyMismatch);
  EXPECT_EQ(verify_header(R"({"alg":"EdDSA","kid":"ec-1"})", *ed_), JwtError::kKeyMismatch);
}

// --- keys ---

TEST_F(Jwt, AnUnknownKidIsItsOwnError) {
  const SigningKey stranger = test::generate_key(JwtAlg::kEdDSA, "ed-2");
  EXPECT_EQ(verify_claims(good_claims(), stranger), JwtError::kUnknownKey);
}

TEST_F(Jwt, WithoutAKidTheOnlyKeyForTheAlgorithmIsUsed) {
  const SigningKey anonymous_rsa{JwtAlg::kRS256, "", nullptr};
  const std::string header = R"({"alg":"RS256","typ":"JWT"})";
  EXPECT_EQ(verify_header(header, *rsa_), JwtError::kNone);
  EXPECT_EQ(out_.kid, "rsa-1");
  EXPECT_EQ(verify_header(R"({"alg":"RS256","kid":""})", *rsa_), JwtError::kNone);

  // Two RSA keys: no kid is ambiguous; an EdDSA token still finds its one key.
  const SigningKey rsa2 = test::generate_key(JwtAlg::kRS256, "rsa-2");
  std::string error;
  const auto two = Jwks::parse(test::jwks_of({rsa_.get(), &rsa2, ed_.get()}), error);
  ASSERT_TRUE(two) << error;
  const auto token = test::sign_token(*rsa_, header, good_claims().json());
  EXPECT_EQ(verify_jwt(token, *two, opts_, kNow, out_), JwtError::kAmbiguousKey);
  EXPECT_EQ(verify_jwt(test::sign_token(*ed_, R"({"alg":"EdDSA"})", good_claims().json()), *two,
                       opts_, kNow, out_),
            JwtError::kNone);
  // No key for the algorithm at all.
  const auto only_ed = Jwks::parse(test::jwks_of({ed_.get()}), error);
  ASSERT_TRUE(only_ed);
  EXPECT_EQ(verify_jwt(token, *only_ed, opts_, kNow, out_), JwtError::kUnknownKey);
}

// --- signatures ---

TEST_F(Jwt, OneFlippedBitAnywhereBreaksTheSignature) {
  for (const SigningKey* key : {rsa_.get(), ec_.get(), ed_.get()}) {
    SCOPED_TRACE(std::string(to_string(key->alg)));
    const std::string token = test::make_token(*key, good_claims().json());
    EXPECT_EQ(verify(flip_bit(token, 2, 0, 0x01)), JwtError::kBadSignature);
    EXPECT_EQ(verify(flip_bit(token, 2, 40, 0x80)), JwtError::kBadSignature);
    // In the payload: a byte of "tenant-a" (the claims still parse).
    const std::string json = good_claims().json();
    EXPECT_EQ(verify(flip_bit(token, 1, json.find("tenant-a") + 7, 0x02)), JwtError::kBadSignature);
    // In the header: the typ's first letter.
    const std::string header = test::default_header(*key);
    EXPECT_EQ(verify(flip_bit(token, 0, header.find("\"JWT\"") + 1, 0x20)),
              JwtError::kBadSignature);  // "jWT": still a JWT typ
  }
}

TEST_F(Jwt, SignaturesOfTheWrongSizeAreRefused) {
  const std::string input =
      base64url_encode(test::default_header(*ec_)) + "." + base64url_encode(good_claims().json());
  const std::string raw = test::sign(*ec_, input);
  ASSERT_EQ(raw.size(), 64u);
  EXPECT_EQ(verify(input + "." + base64url_encode(raw.substr(0, 63))), JwtError::kBadSignature);
  EXPECT_EQ(verify(input + "." + base64url_encode(raw + "x")), JwtError::kBadSignature);
  EXPECT_EQ(verify(input + "." + base64url_encode(std::string(64, '\0'))), JwtError::kBadSignature);
  // OpenSSL's DER form is what ES256 must not be.
  EXPECT_EQ(verify(test::sign_token(*ec_, test::default_header(*ec_), good_claims().json(), true)),
            JwtError::kBadSignature);
  EXPECT_EQ(verify(input + "."), JwtError::kBadSignature);

  const std::string ed_input =
      base64url_encode(test::default_header(*ed_)) + "." + base64url_encode(good_claims().json());
  EXPECT_EQ(verify(ed_input + "." + base64url_encode(test::sign(*ed_, ed_input).substr(1))),
            JwtError::kBadSignature);
  const std::string rsa_input =
      base64url_encode(test::default_header(*rsa_)) + "." + base64url_encode(good_claims().json());
  EXPECT_EQ(verify(rsa_input + "." + base64url_encode(test::sign(*rsa_, rsa_input).substr(1))),
            JwtError::kBadSignature);
}

// --- times ---

TEST_F(Jwt, ExpiryWithLeeway) {
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow - 61)), *ed_), JwtError::kExpired);
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow - 60)), *ed_), JwtError::kExpired);
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow - 59)), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.expires_at, kNow - 59);
  opts_.leeway_seconds = 0;
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow)), *ed_), JwtError::kExpired);
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow + 1)), *ed_), JwtError::kNone);
}

TEST_F(Jwt, ALeewayOutsideItsRangeIsClamped) {
  opts_.leeway_seconds = -100;  // taken as 0
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow)), *ed_), JwtError::kExpired);
  opts_.leeway_seconds = INT64_MAX;  // taken as a year: no overflow
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow - 3600)), *ed_), JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().set("exp", num(kNow - 400 * 86400)), *ed_),
            JwtError::kExpired);
  EXPECT_EQ(verify_claims(good_claims().set("nbf", "253402300799"), *ed_), JwtError::kNotYetValid);
}

TEST_F(Jwt, NotBeforeAndIssuedAtWithLeeway) {
  EXPECT_EQ(verify_claims(good_claims().set("nbf", num(kNow + 61)), *ed_), JwtError::kNotYetValid);
  EXPECT_EQ(verify_claims(good_claims().set("nbf", num(kNow + 60)), *ed_), JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().set("iat", num(kNow + 61)), *ed_), JwtError::kNotYetValid);
  EXPECT_EQ(verify_claims(good_claims().set("iat", num(kNow + 60)), *ed_), JwtError::kNone);
}

TEST_F(Jwt, ExpiryIsRequiredUnlessTheOptionsSayNot) {
  EXPECT_EQ(verify_claims(good_claims().erase("exp"), *ed_), JwtError::kNoExpiry);
  opts_.require_exp = false;
  EXPECT_EQ(verify_claims(good_claims().erase("exp"), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.expires_at, 0);
}

TEST_F(Jwt, TimesThatAreNotDatesAreMalformed) {
  for (const char* bad : {"\"1700000600\"", "-1", "-0.5", "1e300", "253402300800",
                          "99999999999999999999", "true", "null", "[1]", "{}"}) {
    EXPECT_EQ(verify_claims(good_claims().set("exp", bad), *ed_), JwtError::kMalformed) << bad;
    EXPECT_EQ(verify_claims(good_claims().set("nbf", bad), *ed_), JwtError::kMalformed) << bad;
    EXPECT_EQ(verify_claims(good_claims().set("iat", bad), *ed_), JwtError::kMalformed) << bad;
  }
}

// --- issuer and audience ---

TEST_F(Jwt, IssuerMustMatch) {
  EXPECT_EQ(verify_claims(good_claims().set("iss", quoted("https://evil.example")), *ed_),
            JwtError::kWrongIssuer);
  EXPECT_EQ(verify_claims(good_claims().set("iss", quoted("https://issuer.example/")), *ed_),
            JwtError::kWrongIssuer);
  EXPECT_EQ(verify_claims(good_claims().erase("iss"), *ed_), JwtError::kWrongIssuer);
  EXPECT_EQ(verify_claims(good_claims().set("iss", "7"), *ed_), JwtError::kMalformed);
  opts_.issuer.clear();
  EXPECT_EQ(verify_claims(good_claims().set("iss", quoted("anyone")), *ed_), JwtError::kNone);
}

TEST_F(Jwt, AudienceAsStringOrArrayMustNameAConfiguredOne) {
  EXPECT_EQ(verify_claims(good_claims().set("aud", quoted("other")), *ed_), JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().set("aud", R"(["x","sluice"])"), *ed_), JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().erase("aud"), *ed_), JwtError::kWrongAudience);
  EXPECT_EQ(verify_claims(good_claims().set("aud", quoted("Sluice")), *ed_),
            JwtError::kWrongAudience);
  EXPECT_EQ(verify_claims(good_claims().set("aud", R"(["x","y"])"), *ed_),
            JwtError::kWrongAudience);
  EXPECT_EQ(verify_claims(good_claims().set("aud", "[]"), *ed_), JwtError::kWrongAudience);
  EXPECT_EQ(verify_claims(good_claims().set("aud", R"({"sluice":true})"), *ed_),
            JwtError::kMalformed);
  EXPECT_EQ(verify_claims(good_claims().set("aud", R"(["sluice",1])"), *ed_), JwtError::kMalformed);
  EXPECT_EQ(verify_claims(good_claims().set("aud", "1"), *ed_), JwtError::kMalformed);
  opts_.audiences.clear();
  EXPECT_EQ(verify_claims(good_claims().erase("aud"), *ed_), JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().set("aud", "[3]"), *ed_), JwtError::kMalformed);
}

// --- tenant and objective ---

TEST_F(Jwt, TenantClaimMustBeASteeringValue) {
  EXPECT_EQ(verify_claims(good_claims().erase("sub"), *ed_), JwtError::kMissingTenant);
  EXPECT_EQ(verify_claims(good_claims().set("sub", "\"\""), *ed_), JwtError::kMissingTenant);
  EXPECT_EQ(verify_claims(good_claims().set("sub", quoted(std::string(128, 'a'))), *ed_),
            JwtError::kNone);
  EXPECT_EQ(verify_claims(good_claims().set("sub", quoted(std::string(129, 'a'))), *ed_),
            JwtError::kBadTenant);
  for (const char* bad : {"\"a b\"", "\"a\\n\"", "\"caf\\u00e9\"", "\"a\\\"b\"", "\"a,b\"",
                          "\"a\\u0000\"", "42", "null", "[\"a\"]", "{}"})
    EXPECT_EQ(verify_claims(good_claims().set("sub", bad), *ed_), JwtError::kBadTenant) << bad;
  ASSERT_EQ(verify_claims(good_claims().set("sub", quoted("org:team/a@x.io=+~")), *ed_),
            JwtError::kNone);
  EXPECT_EQ(out_.tenant, "org:team/a@x.io=+~");
}

TEST_F(Jwt, TenantClaimNameIsConfigurable) {
  opts_.tenant_claim = "tenant_id";
  EXPECT_EQ(verify_claims(good_claims(), *ed_), JwtError::kMissingTenant);
  ASSERT_EQ(verify_claims(good_claims().set("tenant_id", quoted("acme")), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.tenant, "acme");
  opts_.tenant_claim.clear();
  EXPECT_EQ(verify_claims(good_claims().set("", quoted("x")), *ed_), JwtError::kMissingTenant);
}

TEST_F(Jwt, ObjectiveClaimIsOptionalButBoundedWhenPresent) {
  ASSERT_EQ(verify_claims(good_claims().erase("objective"), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.objective, "");
  EXPECT_EQ(verify_claims(good_claims().set("objective", quoted(std::string(129, 'o'))), *ed_),
            JwtError::kBadObjective);
  EXPECT_EQ(verify_claims(good_claims().set("objective", "\"\""), *ed_), JwtError::kBadObjective);
  EXPECT_EQ(verify_claims(good_claims().set("objective", "\"a b\""), *ed_),
            JwtError::kBadObjective);
  EXPECT_EQ(verify_claims(good_claims().set("objective", "3"), *ed_), JwtError::kBadObjective);
}

TEST_F(Jwt, ScopeClaimsAreReadWhenNamedAndBounded) {
  // Not named in the options: not read, whatever the token holds.
  ASSERT_EQ(verify_claims(good_claims().set("models", "7"), *ed_), JwtError::kNone);
  EXPECT_FALSE(out_.scoped());
  opts_.models_claim = "models";
  opts_.max_tokens_claim = "max_tokens";
  ASSERT_EQ(verify_claims(good_claims(), *ed_), JwtError::kNone);
  EXPECT_FALSE(out_.scoped());
  ASSERT_EQ(
      verify_claims(
          good_claims().set("models", R"(["llama-3-8b","qwen/*"])").set("max_tokens", "256"), *ed_),
      JwtError::kNone);
  EXPECT_TRUE(out_.has_models);
  EXPECT_EQ(out_.models, (std::vector<std::string>{"llama-3-8b", "qwen/*"}));
  EXPECT_EQ(out_.max_tokens, 256u);
  // An OAuth-style space-separated string; an empty list allows no model.
  ASSERT_EQ(verify_claims(good_claims().set("models", quoted(" a  b* ")), *ed_), JwtError::kNone);
  EXPECT_EQ(out_.models, (std::vector<std::string>{"a", "b*"}));
  ASSERT_EQ(verify_claims(good_claims().set("models", "[]"), *ed_), JwtError::kNone);
  EXPECT_TRUE(out_.has_models);
  EXPECT_TRUE(out_.models.empty());
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? ",\"m" : "\"m") + std::to_string(i) + "\"";
  many += "]";
  for (const std::string& bad : {std::string("7"), std::string("[1]"), std::string(R"(["a*b"])"),
                                 std::string(R"(["*"])"), std::string(R"({"a":1})"), many})
    EXPECT_EQ(verify_claims(good_claims().set("models", bad), *ed_), JwtError::kBadScope) << bad;
  for (const std::string bad : {"0", "-1", "1.5", "\"9\"", "1000000001"})
    EXPECT_EQ(verify_claims(good_claims().set("max_tokens", bad), *ed_), JwtError::kBadScope)
        << bad;
  EXPECT_EQ(to_string(JwtError::kBadScope), "token-bad-scope");
}

TEST(JwtSteering, ClaimBytesAreTheProtocolsSteeringBytes) {
  // verify_jwt's own copy of the set (auth may not import protocol) against
  // the original, byte by byte, through one-byte tenants.
  for (int c = 0; c < 256; ++c) {
    const std::string v(1, static_cast<char>(c));
    const bool steering = protocol::is_valid_steering_value(v, kMaxClaimBytes);
    // A JSON string with that byte, escaped where JSON needs it.
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
    const std::string json = R"({"sub":")" + std::string(escaped) + R"(","exp":1700000600})";
    static const SigningKey key = test::generate_key(JwtAlg::kEdDSA, "k");
    static std::string error;
    static const auto jwks = Jwks::parse(test::jwks_of({&key}), error);
    JwtOptions o;
    VerifiedToken out;
    const JwtError e = verify_jwt(test::make_token(key, json), *jwks, o, kNow, out);
    if (c < 0x80) {
      EXPECT_EQ(e == JwtError::kNone, steering) << c;
    } else {
      EXPECT_FALSE(steering);  // \u0080.. are two or more UTF-8 bytes
      EXPECT_EQ(e, JwtError::kBadTenant) << c;
    }
  }
}

// --- size and shape ---

TEST_F(Jwt, A64KiBTokenIsRefusedBeforeDecoding) {
  // Bytes that would be malformed if anything looked at them.
  EXPECT_EQ(verify(std::string(64 * 1024, '\xff')), JwtError::kTooLong);
  const std::string big =
      test::make_token(*ed_, good_claims().set("pad", quoted(std::string(48 * 1024, 'p'))).json());
  ASSERT_GT(big.size(), 64u * 1024);
  EXPECT_EQ(verify(big), JwtError::kTooLong);
  opts_.max_token_bytes = big.size();
  EXPECT_EQ(verify(big), JwtError::kNone);
  opts_.max_token_bytes = big.size() - 1;
  EXPECT_EQ(verify(big), JwtError::kTooLong);
}

TEST_F(Jwt, OnlyThreePartsWithHeaderAndPayload) {
  const std::string token = test::make_token(*ed_, good_claims().json());
  const auto p = parts_of(token);
  for (const std::string& bad :
       {std::string(), std::string("."), std::string(".."), std::string("..."), p[0],
        p[0] + "." + p[1], token + ".", token + "." + p[2], "." + p[1] + "." + p[2],
        p[0] + ".." + p[2], token + ".a.b" /* JWE's five parts */})
    EXPECT_EQ(verify(bad), JwtError::kMalformed) << bad;
}

TEST_F(Jwt, BadBase64UrlInAnyPartIsMalformed) {
  const std::string token = test::make_token(*rsa_, good_claims().json());
  for (int part = 0; part < 3; ++part) {
    for (const char* junk : {"+", "/", "=", "!", " ", "%2B", "\xc3\xa9"}) {
      auto p = parts_of(token);
      p[part].insert(4, junk);
      EXPECT_EQ(verify(join(p)), JwtError::kMalformed) << part << " " << junk;
    }
    auto p = parts_of(token);
    while (p[part].size() % 4 != 1) p[part] += "A";  // no length is 1 mod 4
    EXPECT_EQ(verify(join(p)), JwtError::kMalformed) << part;
    p = parts_of(token);
    if (p[part].size() % 4 != 0) {  // the last character's spare bits set
      p[part].back() = 'B';
      EXPECT_EQ(verify(join(p)), JwtError::kMalformed) << part;
    }
  }
  auto p = parts_of(token);
  p[2] += "==";  // padding
  EXPECT_EQ(verify(join(p)), JwtError::kMalformed);
}

TEST_F(Jwt, HeaderJsonMustBeAnObjectWithAStringAlg) {
  for (const char* bad :
       {R"({"alg":"EdDSA","kid":"ed-1")", R"({"alg":"EdDSA","kid":"ed-1"}x)", R"(["EdDSA"])",
        R"("EdDSA")", "null", "", R"({"alg":"EdDSA","alg":"EdDSA","kid":"ed-1"})",
        R"({"alg":"EdDSA","kid":"ed-1","kid":"rsa-1"})", R"({"alg":7,"kid":"ed-1"})",
        R"({"alg":["EdDSA"],"kid":"ed-1"})", R"({"alg":"EdDSA","kid":7})",
        R"({"alg":"EdDSA","kid":"ed-1","typ":1})", R"({"kid":"ed-1"})", "{\"alg\":\"EdDSA\xff\"}"})
    EXPECT_EQ(verify_header(bad, *ed_), JwtError::kMalformed) << bad;
}

TEST_F(Jwt, UnsupportedHeaderMembersAreRefused) {
  for (const char* bad :
       {R"({"alg":"EdDSA","kid":"ed-1","crit":["exp"],"exp":1})",
        R"({"alg":"EdDSA","kid":"ed-1","crit":[]})", R"({"alg":"EdDSA","kid":"ed-1","cty":"JWT"})",
        R"({"alg":"EdDSA","kid":"ed-1","typ":"JOSE"})",
        R"({"alg":"EdDSA","kid":"ed-1","typ":"at+jwt2"})",
        R"({"alg":"EdDSA","kid":"ed-1","b64":false,"crit":["b64"]})"})
    EXPECT_EQ(verify_header(bad, *ed_), JwtError::kUnsupportedHeader) << bad;
}

TEST_F(Jwt, SignedPayloadJsonMustBeAnObjectOfWellTypedClaims) {
  const std::string good = good_claims().json();
  for (const std::string& bad :
       {good.substr(0, good.size() - 1), good + " x", std::string("[") + good + "]",
        std::string("\"sub\""), std::string("null"), std::string(""),
        good_claims().json().insert(1, R"("sub":"tenant-b",)"),
        good_claims().json().insert(1, R"("exp":9999999999,)"), std::string("{\"sub\":\"a\xff\"}")})
    EXPECT_EQ(verify(test::make_token(*ed_, bad)), JwtError::kMalformed) << bad;
  EXPECT_EQ(verify_claims(good_claims().set("exp", quoted("soon")), *ed_), JwtError::kMalformed);
}

// --- reasons and threads ---

TEST(JwtErrors, EachHasItsOwnStableReason) {
  std::set<std::string_view> seen;
  for (int e = 0; e <= static_cast<int>(JwtError::kInternal); ++e) {
    const auto reason = to_string(static_cast<JwtError>(e));
    EXPECT_TRUE(seen.insert(reason).second) << reason;
    EXPECT_FALSE(reason.empty());
  }
  EXPECT_EQ(to_string(JwtError::kExpired), "token-expired");
  EXPECT_EQ(to_string(JwtError::kUnknownKey), "token-unknown-kid");
}

TEST_F(Jwt, ThreadsVerifyWithOneSharedKeySet) {
  std::vector<std::string> tokens;
  for (const SigningKey* key : {rsa_.get(), ec_.get(), ed_.get()})
    for (int i = 0; i < 8; ++i)
      tokens.push_back(test::make_token(*key, good_claims().set("jti", num(i)).json()));
  std::vector<std::thread> threads;
  std::vector<int> accepted(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const JwtOptions o = options();
      VerifiedToken out;
      for (int round = 0; round < 5; ++round)
        for (const auto& token : tokens)
          accepted[t] += verify_jwt(token, *jwks_, o, kNow, out) == JwtError::kNone;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(accepted[t], 5 * 24);
}

}  // namespace
}  // namespace sluice::auth
