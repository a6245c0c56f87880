// Jwks::parse on good and bad key sets: bad keys are skipped with a reason,
// a bad document is an error, and nothing throws.
#include "auth/jwks.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "auth/crypto.h"
#include "support/jwt_signer.h"

namespace sluice::auth {
namespace {

using test::SigningKey;

class JwksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kRS256, "rsa-1"));
    ec_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kES256, "ec-1"));
    ed_ = std::make_unique<SigningKey>(test::generate_key(JwtAlg::kEdDSA, "ed-1"));
  }
  static void TearDownTestSuite() {
    rsa_.reset();
    ec_.reset();
    ed_.reset();
  }

  // Parses a set of JWK objects; expects it to be read (not an error).
  std::shared_ptr<const Jwks> read(const std::vector<std::string>& jwks) {
    skipped_.clear();
    std::string error;
    auto set = Jwks::parse(test::jwks_of(jwks), error, &skipped_);
    EXPECT_TRUE(set) << error;
    return set;
  }
  // Expects the one JWK to be skipped with a reason containing `why`.
  void expect_skipped(const std::string& jwk, const std::string& why) {
    const auto set = read({jwk});
    ASSERT_TRUE(set);
    EXPECT_EQ(set->size(), 0u) << jwk;
    ASSERT_EQ(skipped_.size(), 1u) << jwk;
    EXPECT_NE(skipped_[0].find(why), std::string::npos) << skipped_[0];
  }
  std::string error_of(std::string_view doc) {
    std::string error;
    EXPECT_FALSE(Jwks::parse(doc, error)) << doc.substr(0, 200);
    return error;
  }

  static inline std::unique_ptr<SigningKey> rsa_, ec_, ed_;
  std::vector<std::string> skipped_;
};

// A JWK with one member's value replaced (raw JSON).
std::string with_member(std::string jwk, const std::string& name, const std::string& raw) {
  const std::string key = "\"" + name + "\":";
  const std::size_t at = jwk.find(key);
  if (at == std::string::npos) return jwk.insert(jwk.size() - 1, "," + key + raw);
  const std::size_t start = at + key.size();
  const std::size_t end =
      jwk[start] == '"' ? jwk.find('"', start + 1) + 1 : jwk.find_first_of(",}", start);
  return jwk.replace(start, end - start, raw);
}

std::string member_bytes(const std::string& jwk, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const std::size_t start = jwk.find(key) + key.size();
  std::string out;
  EXPECT_TRUE(base64url_decode(jwk.substr(start, jwk.find('"', start) - start), out));
  return out;
}

std::string b64(const std::string& bytes) { return "\"" + base64url_encode(bytes) + "\""; }

TEST_F(JwksTest, ReadsTheThreeKeyTypes) {
  const auto set = read({test::public_jwk(*rsa_, R"("use":"sig","alg":"RS256")"),
                         test::public_jwk(*ec_, R"("key_ops":["verify"])"),
                         test::public_jwk(*ed_, R"("alg":"EdDSA","x5t":"ignored")")});
  ASSERT_TRUE(set);
  EXPECT_TRUE(skipped_.empty()) << skipped_[0];
  ASSERT_EQ(set->size(), 3u);
  EXPECT_EQ(set->keys()[0].type, KeyType::kRsa);
  EXPECT_EQ(set->keys()[0].alg, JwtAlg::kRS256);
  EXPECT_EQ(set->keys()[1].type, KeyType::kEcP256);
  EXPECT_FALSE(set->keys()[1].alg);
  EXPECT_EQ(set->keys()[2].type, KeyType::kEd25519);
  const Jwk* key = nullptr;
  ASSERT_EQ(set->find("ec-1", JwtAlg::kES256, key), Jwks::Lookup::kFound);
  EXPECT_EQ(key->kid, "ec-1");
}

TEST_F(JwksTest, AKeyWithoutKidIsKeptAndFoundWithoutOne) {
  const auto set = read({test::public_jwk(rsa_->key.get(), "")});
  ASSERT_TRUE(set);
  ASSERT_EQ(set->size(), 1u);
  EXPECT_EQ(set->keys()[0].kid, "");
  const Jwk* key = nullptr;
  EXPECT_EQ(set->find(std::nullopt, JwtAlg::kRS256, key), Jwks::Lookup::kFound);
  EXPECT_EQ(set->find("", JwtAlg::kRS256, key), Jwks::Lookup::kFound);
  EXPECT_EQ(set->find("rsa-1", JwtAlg::kRS256, key), Jwks::Lookup::kUnknownKid);
  EXPECT_EQ(set->find(std::nullopt, JwtAlg::kES256, key), Jwks::Lookup::kUnknownKid);
}

TEST_F(JwksTest, LookupTellsUnknownMismatchedAndAmbiguousApart) {
  const SigningKey rsa2 = test::generate_key(JwtAlg::kRS256, "rsa-2");
  const auto set = read({test::public_jwk(*rsa_), test::public_jwk(rsa2), test::public_jwk(*ec_),
                         test::public_jwk(ed_->key.get(), "rsa-1")});  // same kid, other type
  ASSERT_TRUE(set);
  ASSERT_EQ(set->size(), 4u);
  const Jwk* key = nullptr;
  EXPECT_EQ(set->find("rsa-1", JwtAlg::kRS256, key), Jwks::Lookup::kFound);
  EXPECT_EQ(key->type, KeyType::kRsa);
  EXPECT_EQ(set->find("rsa-1", JwtAlg::kEdDSA, key), Jwks::Lookup::kFound);
  EXPECT_EQ(key->type, KeyType::kEd25519);
  EXPECT_EQ(set->find("rsa-2", JwtAlg::kES256, key), Jwks::Lookup::kMismatch);
  EXPECT_EQ(set->find("nope", JwtAlg::kRS256, key), Jwks::Lookup::kUnknownKid);
  EXPECT_EQ(set->find(std::nullopt, JwtAlg::kRS256, key), Jwks::Lookup::kAmbiguous);
  EXPECT_EQ(set->find(std::nullopt, JwtAlg::kES256, key), Jwks::Lookup::kFound);
}

TEST_F(JwksTest, AJwkAlgMustFitTheTokensAlg) {
  // An RSA key pinned to RS256 is not found for another alg, and a key's
  // "alg" must fit its own type.
  const auto set = read({test::public_jwk(*rsa_, R"("alg":"RS256")")});
  ASSERT_TRUE(set);
  const Jwk* key = nullptr;
  EXPECT_EQ(set->find("rsa-1", JwtAlg::kRS256, key), Jwks::Lookup::kFound);
  expect_skipped(test::public_jwk(*ec_, R"("alg":"RS256")"), "does not fit the key type");
  expect_skipped(test::public_jwk(*rsa_, R"("alg":"HS256")"), "is not accepted");
  expect_skipped(test::public_jwk(*rsa_, R"("alg":"PS256")"), "is not accepted");
  expect_skipped(test::public_jwk(*rsa_, R"("alg":"none")"), "is not accepted");
}

TEST_F(JwksTest, Rsa1024IsSkipped) {
  const SigningKey weak = test::generate_key(JwtAlg::kRS256, "weak", 1024);
  expect_skipped(test::public_jwk(weak), "1024 bits");
  // 2048 bits with a leading zero byte on n (allowed, RFC 7518 §6.3.1.1).
  const std::string jwk = test::public_jwk(*rsa_);
  EXPECT_EQ(
      read({with_member(jwk, "n", b64(std::string(1, '\0') + member_bytes(jwk, "n")))})->size(),
      1u);
}

TEST_F(JwksTest, RsaNumbersThatCannotBeAKeyAreSkipped) {
  const std::string jwk = test::public_jwk(*rsa_);
  std::string n = member_bytes(jwk, "n");
  n.back() = static_cast<char>(n.back() & ~1);  // even modulus
  expect_skipped(with_member(jwk, "n", b64(n)), "not a valid one");
  expect_skipped(with_member(jwk, "e", b64(std::string(1, '\x01'))), "not a valid one");
  expect_skipped(with_member(jwk, "e", b64(std::string("\x01\x00\x00", 3))), "not a valid one");
  expect_skipped(with_member(jwk, "e", b64(std::string(9, '\x01'))), "over 64 bits");
  expect_skipped(with_member(jwk, "n", b64(std::string(1025, '\xff'))), "8192");
  expect_skipped(with_member(jwk, "n", "\"\""), "\"n\" is not base64url");
}

TEST_F(JwksTest, EcOnAnotherCurveIsSkipped) {
  const auto p384 = test::generate_ec_key("P-384");
  expect_skipped(test::public_jwk(p384.get(), "p384"), "only P-256");
  // A P-256 key's coordinates labelled as another curve.
  expect_skipped(with_member(test::public_jwk(*ec_), "crv", "\"secp256k1\""), "only P-256");
  expect_skipped(with_member(test::public_jwk(*ed_), "crv", "\"X25519\""), "only Ed25519");
}

TEST_F(JwksTest, AnEcPointOffTheCurveIsSkipped) {
  const std::string jwk = test::public_jwk(*ec_);
  std::string y = member_bytes(jwk, "y");
  y.back() = static_cast<char>(y.back() ^ 1);
  expect_skipped(with_member(jwk, "y", b64(y)), "not on P-256");
  expect_skipped(with_member(jwk, "y", b64(std::string(32, '\0'))), "not on P-256");
  // Coordinates not at their full size.
  expect_skipped(with_member(jwk, "x", b64(member_bytes(jwk, "x").substr(1))), "\"x\"");
  expect_skipped(with_member(jwk, "y", b64(y + "z")), "\"y\" is 33 bytes");
}

TEST_F(JwksTest, UseOtherThanSigIsSkipped) {
  expect_skipped(test::public_jwk(*rsa_, R"("use":"enc")"), "\"use\" is \"enc\"");
  expect_skipped(test::public_jwk(*ec_, R"("key_ops":["encrypt","wrapKey"])"), "key_ops");
  EXPECT_EQ(read({test::public_jwk(*rsa_, R"("use":"sig")")})->size(), 1u);
}

TEST_F(JwksTest, MalformedMembersAreSkipped) {
  const std::string rsa = test::public_jwk(*rsa_);
  std::string n = rsa;
  n.insert(n.find("\"n\":\"") + 8, "+");
  expect_skipped(n, "\"n\" is not base64url");
  expect_skipped(with_member(test::public_jwk(*ed_), "x", "\"AAAA=\""), "\"x\" is not base64url");
  expect_skipped(with_member(test::public_jwk(*ed_), "x", b64(std::string(31, 'x'))),
                 "\"x\" is 31 bytes");
  expect_skipped(with_member(rsa, "e", "65537"), "\"e\" is not a string");
  expect_skipped(with_member(rsa, "kid", "7"), "\"kid\" is not a string");
  expect_skipped(with_member(rsa, "key_ops", "\"verify\""), "key_ops");
  expect_skipped(with_member(rsa, "kty", "\"oct\""), "kty \"oct\"");
  expect_skipped(R"({"kid":"x"})", "kty \"\"");
  expect_skipped("42", "not a JSON object");
  expect_skipped("[]", "not a JSON object");
  expect_skipped(R"({"kty":"RSA","kty":"RSA"})", "a member appears twice");
  expect_skipped(with_member(rsa, "kid", "\"" + std::string(257, 'k') + "\""), "kid longer");
  expect_skipped(test::public_jwk(*ec_, R"("d":"AAAA")"), "private key material");
  expect_skipped(R"({"kty":"oct","k":"c2VjcmV0"})", "private key material");
}

TEST_F(JwksTest, ASecondKeyWithTheSameKidAndTypeIsSkipped) {
  const SigningKey other = test::generate_key(JwtAlg::kRS256, "rsa-1");
  const auto set = read({test::public_jwk(*rsa_), test::public_jwk(other)});
  ASSERT_TRUE(set);
  EXPECT_EQ(set->size(), 1u);
  ASSERT_EQ(skipped_.size(), 1u);
  EXPECT_NE(skipped_[0].find("same kid"), std::string::npos);
}

TEST_F(JwksTest, ReasonsAreFitForALogLine) {
  read({with_member(test::public_jwk(*rsa_, R"("use":"enc")"), "kid",
                    R"("a\"b\nc\u00e9)" + std::string(100, 'k') + "\"")});
  ASSERT_EQ(skipped_.size(), 1u);
  for (char c : skipped_[0]) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << skipped_[0];
  EXPECT_LT(skipped_[0].size(), 200u);
}

TEST_F(JwksTest, DocumentsThatAreNotAKeySetAreErrors) {
  EXPECT_NE(error_of("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"keys":[)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("no \"keys\""), std::string::npos);
  EXPECT_NE(error_of(R"({"keys":{}})").find("no \"keys\""), std::string::npos);
  EXPECT_NE(error_of(R"({"keys":[],"keys":[]})").find("twice"), std::string::npos);
  const std::string huge = R"({"keys":[],"pad":")" + std::string(kMaxJwksBytes, 'p') + "\"}";
  EXPECT_NE(error_of(huge).find("over"), std::string::npos);
  // An empty set is a set.
  std::string error;
  const auto empty = Jwks::parse(R"({"keys":[]})", error);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->size(), 0u);
}

TEST_F(JwksTest, AtMost256KeysAreRead) {
  std::vector<std::string> jwks;
  for (int i = 0; i < 257; ++i)
    jwks.push_back(test::public_jwk(ed_->key.get(), "k" + std::to_string(i)));
  const auto set = read(jwks);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->size(), kMaxJwksKeys);
  ASSERT_EQ(skipped_.size(), 1u);
  EXPECT_NE(skipped_[0].find("past the first 256"), std::string::npos);
  const Jwk* key = nullptr;
  EXPECT_EQ(set->find("k255", JwtAlg::kEdDSA, key), Jwks::Lookup::kFound);
  EXPECT_EQ(set->find("k256", JwtAlg::kEdDSA, key), Jwks::Lookup::kUnknownKid);
}

TEST(JwtAlgNames, OnlyTheThreeExactSpellings) {
  EXPECT_EQ(parse_alg("RS256"), JwtAlg::kRS256);
  EXPECT_EQ(parse_alg("ES256"), JwtAlg::kES256);
  EXPECT_EQ(parse_alg("EdDSA"), JwtAlg::kEdDSA);
  for (const char* other : {"none", "HS256", "rs256", "EDDSA", "PS256", "ES384", ""})
    EXPECT_FALSE(parse_alg(other)) << other;
  for (JwtAlg a : {JwtAlg::kRS256, JwtAlg::kES256, JwtAlg::kEdDSA})
    EXPECT_EQ(parse_alg(to_string(a)), a);
}

}  // namespace
}  // namespace sluice::auth
