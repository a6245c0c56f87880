// TLS for integration tests: a test PKI made with the openssl command (a
// private CA, server and client certificates, in a directory of the test's),
// and a blocking TLS client on OpenSSL with the knobs the tests turn
// (versions, ALPN, client certificates) and a small HTTP/1.1 exchange.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/http_client.h"

namespace sluice::test {

// /bin/sh -c `cmd` (posix_spawn: the test process has threads); its exit
// code, -1 if it did not exit.
int run_command(const std::string& cmd);

// Certificates made at test time, never committed: ECDSA P-256 (cheap
// handshakes). Everything under `dir`, which the caller owns.
class TestPki {
 public:
  // The CA (ca.pem / ca.key) and a first server certificate (server.pem /
  // server.key, SAN IP:127.0.0.1 and DNS:localhost, serial `serial`).
  // ok() false (and error()) if the openssl command failed.
  TestPki(std::string dir, int serial = 1001);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  std::string ca() const { return dir_ + "/ca.pem"; }
  std::string server_cert() const { return dir_ + "/server.pem"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  // Issues a new server certificate and key with `serial`, written next to
  // the live files and renamed over them (as a certificate manager does).
  bool reissue_server(int serial);
  // Another server certificate signed by the CA, with subjectAltName `san`
  // (OpenSSL's syntax: "DNS:localhost", "IP:127.0.0.2"): NAME.pem, NAME.key.
  bool issue_server(const std::string& name, const std::string& san);
  // A client certificate signed by the CA (SAN URI `uri`; "": none, the
  // subject's CN is NAME): NAME.pem, NAME.key.
  bool issue_client(const std::string& name, const std::string& uri);
  // A self-signed client certificate no CA of the test vouches for.
  bool issue_untrusted_client(const std::string& name, const std::string& uri);
  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  bool run(const std::string& commands);
  std::string dir_;
  std::string error_;
};

struct TlsClientOptions {
  std::string ca_file;  // "": the server's certificate is not verified
  std::string cert_file, key_file;
  int min_version = 0;  // TLS1_2_VERSION ...; 0: OpenSSL's default
  int max_version = 0;
  int security_level = -1;  // -1: OpenSSL's default; 0 lets TLS 1.0/1.1 ciphers be offered
  std::string ciphers;
  std::vector<std::string> alpn;
  std::chrono::milliseconds timeout{10000};
};

class TlsConnection {
 public:
  TlsConnection(const std::string& host, std::uint16_t port, const TlsClientOptions& o = {});
  ~TlsConnection();
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  // The handshake's outcome (the client's view: under TLS 1.3 a server
  // that refuses the client's certificate says so after it).
  bool established() const { return established_; }
  const std::string& error() const { return error_; }
  std::string version() const;      // "TLSv1.3"
  std::string alpn() const;         // "" when none was selected
  std::string peer_serial() const;  // hex, as OpenSSL prints it ("03E9")

  bool send(const std::string& bytes);
  // Reads (decrypted) until `needle` is in what was read so far (kept in
  // received()), the peer closes, or the timeout. True if found.
  bool read_until(const std::string& needle);
  const std::string& received() const { return in_; }
  void clear_received() { in_.clear(); }
  // One request and its response (Content-Length or chunked), keep-alive.
  Response request(const std::string& method, const std::string& target,
                   const std::string& body = {});

 private:
  bool read_some();
  int fd_ = -1;
  void* ctx_ = nullptr;  // SSL_CTX
  void* ssl_ = nullptr;  // SSL
  bool established_ = false;
  std::string error_;
  std::string in_;
};

}  // namespace sluice::test
