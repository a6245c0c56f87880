#include "auth/crypto.h"

#include <gtest/gtest.h>

namespace sluice::auth {
namespace {

TEST(Crypto, Sha256OfKnownInputs) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Crypto, HexRoundTripAndRejects) {
  const Digest d = sha256("x");
  Digest back{};
  ASSERT_TRUE(from_hex(to_hex(d), back));
  EXPECT_TRUE(constant_time_equal(d, back));
  std::string upper = to_hex(d);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(from_hex(upper, back));
  EXPECT_FALSE(from_hex(to_hex(d).substr(1), back));
  EXPECT_FALSE(from_hex(std::string(63, 'a') + "g", back));
  back[31] ^= 1;
  EXPECT_FALSE(constant_time_equal(d, back));
}

TEST(Crypto, Base64UrlRoundTripsEveryLength) {
  std::string data;
  for (int n = 0; n < 70; ++n) {
    std::string decoded;
    const std::string enc = base64url_encode(data);
    EXPECT_EQ(enc.find_first_of("+/="), std::string::npos);
    ASSERT_TRUE(base64url_decode(enc, decoded)) << n;
    EXPECT_EQ(decoded, data);
    data.push_back(static_cast<char>(n * 37 + 200));
  }
}

TEST(Crypto, Base64UrlKnownValuesAndRejects) {
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  std::string out;
  EXPECT_TRUE(base64url_decode("eyJhbGciOiJFUzI1NiJ9", out));
  EXPECT_EQ(out, R"({"alg":"ES256"})");
  for (const char* bad : {"a", "ab=", "a+b/", "ab c", "AB==", "-_9"}) {
    out.clear();
    EXPECT_FALSE(base64url_decode(bad, out)) << bad;
  }
}

TEST(Crypto, RandomBytesDiffer) {
  std::uint8_t a[32], b[32];
  ASSERT_TRUE(random_bytes(a, sizeof a));
  ASSERT_TRUE(random_bytes(b, sizeof b));
  EXPECT_NE(std::string(reinterpret_cast<char*>(a), 32),
            std::string(reinterpret_cast<char*>(b), 32));
}

}  // namespace
}  // namespace sluice::auth
