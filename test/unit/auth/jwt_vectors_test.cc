// verify_jwt and Jwks::parse against the published examples, not only
// against tokens signed by the test's own helpers: RFC 7515 Appendix A.2
// (RS256) and A.3 (ES256), RFC 8037 Appendix A.4 (Ed25519). The JWKs (their
// public members only: a JWKS with private members is refused) and the
// compact serializations are copied from the RFCs' text.
//
// The RFC 7515 examples' claims are {"iss":"joe", "exp":1300819380,
// "http://example.com/is_root":true}: no "sub", so the tenant is read from
// "iss", and the clock is set before that "exp" (and after it, to see the
// expiry). RFC 8037's payload is a sentence, not a claims set: its signature
// verifies and the claims are then refused as malformed (the order verify_jwt
// keeps: no claim is read before the signature is checked).
#include <gtest/gtest.h>

#include <string>

#include "auth/jwks.h"
#include "auth/jwt.h"

namespace sluice::auth {
namespace {

// RFC 7515 A.2.1's RSA key.
constexpr const char* kRsaJwk = R"({"kty":"RSA",)"
                                R"("n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddx)"
                                R"(HmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMs)"
                                R"(D1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSH)"
                                R"(SXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdV)"
                                R"(MTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8)"
                                R"(NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ",)"
                                R"("e":"AQAB"})";
// RFC 7515 A.3.1's P-256 key.
constexpr const char* kEcJwk = R"({"kty":"EC","crv":"P-256",)"
                               R"("x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",)"
                               R"("y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})";
// RFC 8037 A.2's Ed25519 public key.
constexpr const char* kEdJwk =
    R"({"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})";

// RFC 7515 A.2.1 and A.3.1: the same claims, {"alg":"RS256"} and {"alg":"ES256"}.
constexpr const char* kClaims =
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlf"
    "Q";
const std::string kRs256 = std::string("eyJhbGciOiJSUzI1NiJ9.") + kClaims +
                           ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__"
                           "dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujG"
                           "bds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_"
                           "nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K"
                           "0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-"
                           "eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6"
                           "LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
const std::string kEs256 =
    std::string("eyJhbGciOiJFUzI1NiJ9.") + kClaims +
    ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
// RFC 8037 A.4: {"alg":"EdDSA"} over "Example of Ed25519 signing".
const std::string kEdDsa =
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg";

constexpr std::int64_t kExp = 1300819380;
constexpr std::int64_t kBeforeExp = kExp - 380;

std::shared_ptr<const Jwks> published_keys() {
  std::string error;
  std::vector<std::string> skipped;
  auto keys = Jwks::parse(
      std::string(R"({"keys":[)") + kRsaJwk + "," + kEcJwk + "," + kEdJwk + "]}", error, &skipped);
  EXPECT_TRUE(keys) << error;
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  return keys;
}

JwtOptions rfc_options() {
  JwtOptions o;
  o.tenant_claim = "iss";  // the examples have no "sub"
  o.issuer = "joe";
  return o;
}

// One character of the signature changed (still valid base64url).
std::string with_signature_changed(std::string token) {
  char& c = token[token.rfind('.') + 5];
  c = c == 'A' ? 'B' : 'A';
  return token;
}

TEST(JwtPublishedVectors, Rfc7515RsaAndEcdsaExamplesVerify) {
  auto keys = published_keys();
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 3u);
  for (const auto& [token, alg] :
       {std::pair{kRs256, JwtAlg::kRS256}, std::pair{kEs256, JwtAlg::kES256}}) {
    SCOPED_TRACE(token.substr(0, 20));
    VerifiedToken v;
    ASSERT_EQ(verify_jwt(token, *keys, rfc_options(), kBeforeExp, v), JwtError::kNone);
    EXPECT_EQ(v.tenant, "joe");
    EXPECT_EQ(v.expires_at, kExp);
    EXPECT_EQ(v.alg, alg);
    EXPECT_EQ(v.kid, "");  // neither the JWKs nor the headers name one
    // The RFC's token, its signature changed: refused for the signature.
    EXPECT_EQ(verify_jwt(with_signature_changed(token), *keys, rfc_options(), kBeforeExp, v),
              JwtError::kBadSignature);
    // Past its "exp" (and the leeway): refused as expired.
    JwtOptions o = rfc_options();
    EXPECT_EQ(verify_jwt(token, *keys, o, kExp + o.leeway_seconds, v), JwtError::kExpired);
    EXPECT_EQ(verify_jwt(token, *keys, o, kExp + o.leeway_seconds - 1, v), JwtError::kNone);
    // Another issuer configured; the default tenant claim ("sub") absent.
    o.issuer = "someone-else";
    EXPECT_EQ(verify_jwt(token, *keys, o, kBeforeExp, v), JwtError::kWrongIssuer);
    o = rfc_options();
    o.tenant_claim = "sub";
    EXPECT_EQ(verify_jwt(token, *keys, o, kBeforeExp, v), JwtError::kMissingTenant);
    // The algorithm not allowed by the options.
    o = rfc_options();
    o.algorithms = {JwtAlg::kEdDSA};
    EXPECT_EQ(verify_jwt(token, *keys, o, kBeforeExp, v), JwtError::kAlgorithmNotAllowed);
  }
}

TEST(JwtPublishedVectors, Rfc8037Ed25519ExampleVerifiesAndItsSentenceIsNoClaimsSet) {
  auto keys = published_keys();
  ASSERT_TRUE(keys);
  VerifiedToken v;
  // The signature verifies (the key and algorithm are recorded), then the
  // payload, a sentence, is refused as claims.
  EXPECT_EQ(verify_jwt(kEdDsa, *keys, rfc_options(), kBeforeExp, v), JwtError::kMalformed);
  EXPECT_EQ(v.alg, JwtAlg::kEdDSA);
  VerifiedToken w;
  EXPECT_EQ(verify_jwt(with_signature_changed(kEdDsa), *keys, rfc_options(), kBeforeExp, w),
            JwtError::kBadSignature);
}

}  // namespace
}  // namespace sluice::auth
