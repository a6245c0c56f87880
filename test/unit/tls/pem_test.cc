// tls::read_pem_file, the one bounded reader of both sides' certificates,
// keys and CA bundles: a regular file of at most kMaxPemBytes, anything else
// refused with "PATH: why" before a byte of it is read.
#include "tls/pem.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::tls {
namespace {

class PemFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice-tls-pem-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // The error of reading `path` ("" if it was read).
  static std::string error_of(const std::string& path) {
    std::string text, error;
    const bool ok = read_pem_file(path, text, error);
    EXPECT_EQ(ok, error.empty());
    return error;
  }

  std::string dir_;
};

TEST_F(PemFiles, AFileUpToTheBoundIsReadWhole) {
  const std::string body(kMaxPemBytes, 'A');
  const std::string path = write("max.pem", body);
  std::string text, error;
  ASSERT_TRUE(read_pem_file(path, text, error)) << error;
  EXPECT_EQ(text, body);
}

TEST_F(PemFiles, WhatIsNotASmallRegularFileIsRefusedNamingIt) {
  const std::string big = write("big.pem", std::string(kMaxPemBytes + 1, 'A'));
  EXPECT_EQ(error_of(big), big + ": larger than 1 MiB (not a PEM certificate or key)");
  EXPECT_EQ(error_of(dir_), dir_ + ": is a directory");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), fifo + ": not a regular file");  // and the open did not wait
  EXPECT_EQ(error_of("/dev/zero"), "/dev/zero: not a regular file");
  EXPECT_EQ(error_of(dir_ + "/missing.pem"),
            dir_ + "/missing.pem: cannot open file (No such file or directory)");
}

TEST(PemText, NoCertificateInItIsTheQueuesErrorAndTheEndOfTextIsNot) {
  ERR_clear_error();
  EXPECT_EQ(openssl_errors(), "unknown error");  // an empty queue
  const std::string text = "not a certificate\n";
  Bio bio = memory_bio(text);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
  EXPECT_EQ(cert, nullptr);
  EXPECT_TRUE(only_end_of_pem());  // "no start line": what the end of PEM text says
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace sluice::tls
