// sluice-jwt-sign, the tool integration tests and benchmarks will call:
// a key it generates, the JWKS it prints and a token it signs verify
// together with the real verifier.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "auth/jwt.h"

namespace sluice::auth {
namespace {

// stdout of a shell command, and its exit status.
std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class JwtSignCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice-jwt-sign-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string generate(const std::string& alg) {
    int status = 0;
    const std::string path = dir_ + "/" + alg + ".pem";
    run(std::string(SLUICE_JWT_SIGN_BIN) + " --generate " + alg + " > " + path, status);
    EXPECT_EQ(status, 0);
    return path;
  }

  std::string dir_;
};

TEST_F(JwtSignCli, GeneratedKeysSignTokensTheirJwksVerifies) {
  const std::string rsa = generate("RS256"), ec = generate("ES256"), ed = generate("EdDSA");
  int status = 0;
  const std::string bin = SLUICE_JWT_SIGN_BIN;
  const std::string jwks =
      run(bin + " --jwks " + rsa + " --kid r --jwks " + ec + " --kid e --jwks " + ed + " --kid d",
          status);
  ASSERT_EQ(status, 0) << jwks;
  std::string error;
  const auto keys = Jwks::parse(jwks, error);
  ASSERT_TRUE(keys) << error;
  ASSERT_EQ(keys->size(), 3u);

  const std::string payload = R"('{"sub":"tenant-x","exp":4102444800}')";
  JwtOptions o;
  for (const auto& [path, kid] : {std::pair{rsa, "r"}, {ec, "e"}, {ed, "d"}}) {
    const std::string token =
        trimmed(run(bin + " --key " + path + " --kid " + kid + " " + payload, status));
    ASSERT_EQ(status, 0) << token;
    VerifiedToken out;
    EXPECT_EQ(verify_jwt(token, *keys, o, 1'700'000'000, out), JwtError::kNone) << kid;
    EXPECT_EQ(out.tenant, "tenant-x");
    EXPECT_EQ(out.kid, kid);
  }
  // The payload from stdin, and a header of the caller's.
  const std::string token =
      trimmed(run("echo -n " + payload + " | " + bin + " --key " + ed +
                      R"( --header '{"alg":"EdDSA","kid":"d","typ":"at+jwt"}' -)",
                  status));
  ASSERT_EQ(status, 0);
  VerifiedToken out;
  EXPECT_EQ(verify_jwt(token, *keys, o, 1'700'000'000, out), JwtError::kNone);
}

TEST_F(JwtSignCli, UsageErrorsExitTwo) {
  int status = 0;
  const std::string bin = SLUICE_JWT_SIGN_BIN;
  run(bin + " 2>/dev/null", status);
  EXPECT_EQ(status, 2);
  run(bin + " --generate HS256 2>/dev/null", status);
  EXPECT_EQ(status, 2);
  run(bin + " --key /nonexistent '{}' 2>/dev/null", status);
  EXPECT_EQ(status, 2);
  std::ofstream(dir_ + "/junk.pem") << "not a key";
  run(bin + " --jwks " + dir_ + "/junk.pem 2>/dev/null", status);
  EXPECT_EQ(status, 2);
}

}  // namespace
}  // namespace sluice::auth
