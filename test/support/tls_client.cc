#include "support/tls_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace sluice::test {
namespace {}  // namespace

int run_command(const std::string& cmd) {
  pid_t pid = -1;
  const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) !=
      0)
    return -1;
  int status = -1;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A new P-256 key and a certificate signing request for `cn`.
std::string new_key_and_csr(const std::string& key, const std::string& csr, const std::string& cn) {
  return "openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout " + key +
         " -out " + csr + " -subj '/CN=" + cn + "'";
}

std::string ssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace

TestPki::TestPki(std::string dir, int serial) : dir_(std::move(dir)) {
  if (!run("openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
           "-keyout ca.key -out ca.pem -subj '/CN=sluice test CA' -days 2 "
           "-addext basicConstraints=critical,CA:TRUE "
           "-addext keyUsage=critical,keyCertSign,cRLSign"))
    return;
  reissue_server(serial);
}

bool TestPki::run(const std::string& commands) {
  const std::string log = dir_ + "/openssl.log";
  if (run_command("cd " + dir_ + " && (" + commands + ") >>" + log + " 2>&1") == 0) return true;
  error_ = "openssl failed: " + commands + "\n" + slurp(log);
  return false;
}

bool TestPki::reissue_server(int serial) {
  const std::string s = std::to_string(serial);
  return run(
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' "
      "> server.ext && " +
      new_key_and_csr("next.key", "next.csr", "localhost") +
      " && openssl x509 -req -in next.csr -CA ca.pem -CAkey ca.key -set_serial " + s +
      " -days 2 -extfile server.ext -out next.pem && mv next.pem server.pem && "
      "mv next.key server.key");
}

bool TestPki::issue_server(const std::string& name, const std::string& san) {
  return run("printf 'subjectAltName=" + san + "\\nextendedKeyUsage=serverAuth\\n' > " + name +
             ".ext && " + new_key_and_csr(name + ".key", name + ".csr", name) +
             " && openssl x509 -req -in " + name +
             ".csr -CA ca.pem -CAkey ca.key -set_serial 3001 -days 2 -extfile " + name +
             ".ext -out " + name + ".pem");
}

bool TestPki::issue_client(const std::string& name, const std::string& uri) {
  const std::string san = uri.empty() ? "" : "subjectAltName=URI:" + uri + "\\n";
  return run("printf '" + san + "extendedKeyUsage=clientAuth\\n' > " + name + ".ext && " +
             new_key_and_csr(name + ".key", name + ".csr", name) + " && openssl x509 -req -in " +
             name + ".csr -CA ca.pem -CAkey ca.key -set_serial " + "2001 -days 2 -extfile " + name +
             ".ext -out " + name + ".pem");
}

bool TestPki::issue_untrusted_client(const std::string& name, const std::string& uri) {
  return run(
      "openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-keyout " +
      name + ".key -out " + name + ".pem -subj '/CN=" + name + "' -days 2 -addext " +
      "subjectAltName=URI:" + uri);
}

TlsConnection::TlsConnection(const std::string& host, std::uint16_t port,
                             const TlsClientOptions& o) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(o.timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((o.timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    error_ = std::string("connect: ") + std::strerror(errno);
    return;
  }
  ERR_clear_error();
  SSL_CTX* c = SSL_CTX_new(TLS_client_method());
  ctx_ = c;
  if (o.security_level >= 0) SSL_CTX_set_security_level(c, o.security_level);
  if (o.min_version) SSL_CTX_set_min_proto_version(c, o.min_version);
  if (o.max_version) SSL_CTX_set_max_proto_version(c, o.max_version);
  if (!o.ciphers.empty()) SSL_CTX_set_cipher_list(c, o.ciphers.c_str());
  if (!o.ca_file.empty()) {
    SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  }
  if (!o.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    error_ = "client certificate: " + ssl_errors();
    return;
  }
  SSL* s = SSL_new(c);
  ssl_ = s;
  SSL_set_fd(s, fd_);
  SSL_set_tlsext_host_name(s, "localhost");
  if (!o.ca_file.empty()) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host.c_str());
  if (!o.alpn.empty()) {
    std::string wire;
    for (const auto& p : o.alpn) wire += static_cast<char>(p.size()) + p;
    SSL_set_alpn_protos(s, reinterpret_cast<const unsigned char*>(wire.data()),
                        static_cast<unsigned>(wire.size()));
  }
  const int r = SSL_connect(s);
  if (r == 1) {
    established_ = true;
    return;
  }
  error_ = "handshake failed (SSL_get_error " + std::to_string(SSL_get_error(s, r)) +
           "): " + ssl_errors() + (errno ? std::string(" errno: ") + std::strerror(errno) : "");
}

TlsConnection::~TlsConnection() {
  if (ssl_) {
    if (established_) SSL_shutdown(static_cast<SSL*>(ssl_));  // close_notify, no wait
    SSL_free(static_cast<SSL*>(ssl_));
  }
  if (ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
  if (fd_ >= 0) ::close(fd_);
}

std::string TlsConnection::version() const {
  return ssl_ ? SSL_get_version(static_cast<SSL*>(ssl_)) : "";
}

std::string TlsConnection::alpn() const {
  if (!ssl_) return "";
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(static_cast<SSL*>(ssl_), &p, &len);
  return p ? std::string(reinterpret_cast<const char*>(p), len) : "";
}

std::string TlsConnection::peer_serial() const {
  if (!ssl_) return "";
  X509* cert = SSL_get1_peer_certificate(static_cast<SSL*>(ssl_));
  if (!cert) return "";
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = hex;
  OPENSSL_free(hex);
  BN_free(bn);
  X509_free(cert);
  return out;
}

bool TlsConnection::send(const std::string& bytes) {
  if (!established_) return false;
  std::size_t off = 0;
  while (off < bytes.size()) {
    const int n = SSL_write(static_cast<SSL*>(ssl_), bytes.data() + off,
                            static_cast<int>(bytes.size() - off));
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

bool TlsConnection::read_some() {
  if (!established_) return false;
  char buf[16384];
  const int n = SSL_read(static_cast<SSL*>(ssl_), buf, sizeof buf);
  if (n <= 0) {
    if (error_.empty())
      error_ =
          "read: " + std::to_string(SSL_get_error(static_cast<SSL*>(ssl_), n)) + " " + ssl_errors();
    return false;
  }
  in_.append(buf, static_cast<std::size_t>(n));
  return true;
}

bool TlsConnection::read_until(const std::string& needle) {
  while (in_.find(needle) == std::string::npos)
    if (!read_some()) return false;
  return true;
}

Response TlsConnection::request(const std::string& method, const std::string& target,
                                const std::string& body) {
  Response r;
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!body.empty())
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!send(req) || !read_until("\r\n\r\n")) {
    r.error = error_.empty() ? "no response" : error_;
    return r;
  }
  const std::size_t head_end = in_.find("\r\n\r\n") + 4;
  std::istringstream head(in_.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  if (line.size() > 12) r.status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line) && line != "\r") {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    r.headers[name] = value;
  }
  in_.erase(0, head_end);
  if (r.headers.count("content-length")) {
    const std::size_t len = std::stoul(r.headers["content-length"]);
    while (in_.size() < len)
      if (!read_some()) return r.error = "body cut: " + error_, r;
    r.body = in_.substr(0, len);
    in_.erase(0, len);
  } else if (r.header("transfer-encoding") == "chunked") {
    for (;;) {
      if (!read_until("\r\n")) return r.error = "chunk cut: " + error_, r;
      const std::size_t size = std::stoul(in_.substr(0, in_.find("\r\n")), nullptr, 16);
      const std::size_t data = in_.find("\r\n") + 2;
      while (in_.size() < data + size + 2)
        if (!read_some()) return r.error = "chunk cut: " + error_, r;
      r.body += in_.substr(data, size);
      in_.erase(0, data + size + 2);
      if (size == 0) break;
    }
  }
  return r;
}

}  // namespace sluice::test
