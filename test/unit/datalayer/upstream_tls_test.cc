// build_upstream_tls's reading of the files it is given: each a regular file
// of at most tls::kMaxPemBytes, refused otherwise (too large, a
// directory, a pipe, not PEM) with an error naming the setting and the file,
// before OpenSSL reads any of it.
#include "datalayer/upstream_tls.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tls/pem.h"

namespace sluice::datalayer {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class UpstreamTlsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice-upstream-tls-XXXXXX";
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
  // The pool's setting with this CA file; the error of building it.
  std::string error_with_ca(const std::string& ca_file) {
    config::Config c;
    c.source = "sluice.yaml";
    c.server.upstream_tls.enabled = true;
    c.server.upstream_tls.ca_file = ca_file;
    std::string error;
    auto set = build_upstream_tls(c, error);
    EXPECT_EQ(set == nullptr, !error.empty());
    return error;
  }

  std::string dir_;
};

TEST_F(UpstreamTlsFiles, ACaFileOverTheBoundIsRefusedNamingIt) {
  const std::string big = write("big.pem", std::string(tls::kMaxPemBytes + 1, 'A'));
  const std::string error = error_with_ca(big);
  EXPECT_TRUE(contains(error, "sluice.yaml: server.upstreamTls.caFile")) << error;
  EXPECT_TRUE(contains(error, big + ": larger than 1 MiB")) << error;
}

TEST_F(UpstreamTlsFiles, ADirectoryOrAPipeIsNotReadAsACaFile) {
  std::string error = error_with_ca(dir_);
  EXPECT_TRUE(contains(error, dir_ + ": is a directory")) << error;
  const std::string fifo = dir_ + "/ca.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  error = error_with_ca(fifo);  // nobody writes: a blocking read would hang here
  EXPECT_TRUE(contains(error, fifo + ": not a regular file")) << error;
  error = error_with_ca("/dev/zero");
  EXPECT_TRUE(contains(error, "/dev/zero: not a regular file")) << error;
}

TEST_F(UpstreamTlsFiles, AFileWithoutACertificateIsRefused) {
  const std::string text = write("text.pem", "not a certificate\n");
  std::string error = error_with_ca(text);
  EXPECT_TRUE(contains(error, "caFile " + text + ": no PEM certificate")) << error;
  error = error_with_ca(dir_ + "/missing.pem");
  EXPECT_TRUE(contains(error, dir_ + "/missing.pem: cannot open file")) << error;
}

TEST_F(UpstreamTlsFiles, AnEndpointsCertificateAndKeyFilesAreBoundedToo) {
  const std::string big = write("big.pem", std::string(tls::kMaxPemBytes + 1, 'A'));
  config::Config c;
  c.source = "sluice.yaml";
  config::EndpointConfig e;
  e.address = "10.0.0.1:8000";
  e.tls.emplace();
  e.tls->enabled = true;
  e.tls->insecure_skip_verify = true;  // no CA file needed: the system's paths
  e.tls->certificate_file = big;
  e.tls->key_file = big;
  c.endpoints.push_back(e);
  std::string error;
  EXPECT_EQ(build_upstream_tls(c, error), nullptr);
  EXPECT_TRUE(contains(
      error, "endpoints.10.0.0.1:8000.tls.certificateFile: " + big + ": larger than 1 MiB"))
      << error;
  // Without TLS anywhere, nothing is read and everything is plain HTTP.
  c.endpoints[0].tls->enabled = false;
  error.clear();
  auto set = build_upstream_tls(c, error);
  ASSERT_NE(set, nullptr) << error;
  EXPECT_EQ(set->for_address("10.0.0.1:8000"), nullptr);
  EXPECT_EQ(set->for_address("10.0.0.2:8000"), nullptr);
}

}  // namespace
}  // namespace sluice::datalayer
