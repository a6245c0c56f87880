#include "support/fake_upstream.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>

namespace sluice::test {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool send_all_plain(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

// A connection's bytes: the socket's, or a TLS session's over it.
struct FakeUpstream::Wire {
  int fd;
  SSL* ssl = nullptr;
  ~Wire() {
    if (ssl) SSL_free(ssl);
  }
  ssize_t recv(char* buf, std::size_t n) {
    if (!ssl) return ::recv(fd, buf, n, 0);
    const int r = SSL_read(ssl, buf, static_cast<int>(std::min<std::size_t>(n, INT_MAX)));
    return r > 0 ? r : -1;
  }
  bool send_all(const std::string& bytes) {
    if (!ssl) return send_all_plain(fd, bytes);
    for (std::size_t off = 0; off < bytes.size();) {
      const int n = SSL_write(ssl, bytes.data() + off,
                              static_cast<int>(std::min<std::size_t>(bytes.size() - off, INT_MAX)));
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
};

std::string UpstreamRequest::header(const std::string& lower_name) const {
  const std::string h = lower(head);
  const std::string key = "\r\n" + lower_name + ":";
  auto at = h.find(key);
  if (at == std::string::npos) return {};
  auto start = at + key.size();
  auto end = h.find("\r\n", start);
  std::string v = head.substr(start, end - start);
  while (!v.empty() && v.front() == ' ') v.erase(v.begin());
  return v;
}

std::string FakeUpstream::response(int status, const std::string& body,
                                   const std::string& extra_headers) {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

FakeUpstream::FakeUpstream(Responder responder, int receive_buffer)
    : responder_(std::move(responder)) {
  start_listening(receive_buffer);
}

FakeUpstream::FakeUpstream(Responder responder, const FakeTls& tls)
    : responder_(std::move(responder)), also_plain_(tls.also_plain) {
  // A TLS write to a peer that left raises SIGPIPE (OpenSSL's socket BIO
  // does not ask send() not to): an error here, as in sluice.
  ::signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  tls_ctx_ = ctx;
  if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, tls.certificate_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return;  // not ok(): nothing listens
  start_listening(0);
}

void FakeUpstream::start_listening(int receive_buffer) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (receive_buffer > 0)
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeUpstream::~FakeUpstream() {
  if (listen_fd_ < 0) {
    SSL_CTX_free(static_cast<SSL_CTX*>(tls_ctx_));
    return;
  }
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  SSL_CTX_free(static_cast<SSL_CTX*>(tls_ctx_));
}

void FakeUpstream::set_metrics(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = std::move(text);
}

void FakeUpstream::require_metrics_authorization(std::string value) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_authorization_ = std::move(value);
}

std::vector<UpstreamRequest> FakeUpstream::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeUpstream::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    connections_ += 1;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

// A scrape: counted, then answered (401 without the required
// Authorization, else the metrics text or 404). False if the answer could
// not be sent.
bool FakeUpstream::answer_scrape(Wire& wire, const UpstreamRequest& r) {
  (r.tls ? tls_scrapes_ : plain_scrapes_) += 1;
  std::optional<std::string> text;
  std::string required;
  {
    std::lock_guard<std::mutex> lock(mu_);
    text = metrics_;
    required = metrics_authorization_;
  }
  if (!required.empty() && r.header("authorization") != required) {
    scrapes_refused_ += 1;
    return wire.send_all(response(401, R"({"error":"unauthorized"})"));
  }
  return wire.send_all(text ? response(200, *text) : response(404, "{}"));
}

void FakeUpstream::serve(int fd) {
  std::string in;
  char buf[8192];
  Wire wire{fd};
  if (tls_ctx_) {
    // With plain HTTP beside TLS, a TLS connection begins with a handshake
    // record (type 22).
    unsigned char first = 0;
    const bool tls = !also_plain_ || (::recv(fd, &first, 1, MSG_PEEK) == 1 && first == 0x16);
    if (tls) {
      wire.ssl = SSL_new(static_cast<SSL_CTX*>(tls_ctx_));
      SSL_set_fd(wire.ssl, fd);
      if (SSL_accept(wire.ssl) != 1) goto done;
      tls_handshakes_ += 1;
    }
  }
  for (;;) {
    // One request: head, then Content-Length bytes of body.
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = wire.recv(buf, sizeof buf);
      if (n <= 0) goto done;
      bytes_received_ += static_cast<std::uint64_t>(n);
      in.append(buf, static_cast<std::size_t>(n));
    }
    {
      UpstreamRequest r;
      r.tls = wire.ssl != nullptr;
      r.head = in.substr(0, head_end + 2);
      const std::size_t length = std::strtoull(r.header("content-length").c_str(), nullptr, 10);
      in.erase(0, head_end + 4);
      while (in.size() < length) {
        ssize_t n = wire.recv(buf, sizeof buf);
        if (n <= 0) goto done;
        bytes_received_ += static_cast<std::uint64_t>(n);
        in.append(buf, static_cast<std::size_t>(n));
      }
      r.body = in.substr(0, length);
      in.erase(0, length);
      if (r.head.rfind("GET /metrics", 0) == 0) {
        if (!answer_scrape(wire, r)) goto done;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(r);
      }
      Reply reply = responder_(r);
      std::string last = std::move(reply.bytes);
      if (reply.then) {
        if (!last.empty() && !wire.send_all(last)) goto failed;
        last = reply.then();
      }
      if (reply.close_after && reply.close_with_bytes) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
      }
      if (!last.empty() && !wire.send_all(last)) goto failed;
      for (std::string part; reply.next && reply.next(part); part.clear())
        if (!part.empty() && !wire.send_all(part)) goto failed;
      if (reply.close_after && reply.close_with_bytes) ::shutdown(fd, SHUT_WR);
      if (reply.close_after) goto done;
    }
  }
  // A reply the peer stopped taking (it closed or reset the connection).
failed:
  send_failures_ += 1;
done:
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard<std::mutex> lock(mu_);
  fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  ::close(fd);
}

}  // namespace sluice::test
