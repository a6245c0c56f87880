#include "support/fake_upstream.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace sluice::test {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool send_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

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
}

void FakeUpstream::set_metrics(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = std::move(text);
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

void FakeUpstream::serve(int fd) {
  std::string in;
  char buf[8192];
  for (;;) {
    // One request: head, then Content-Length bytes of body.
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) goto done;
      bytes_received_ += static_cast<std::uint64_t>(n);
      in.append(buf, static_cast<std::size_t>(n));
    }
    {
      UpstreamRequest r;
      r.head = in.substr(0, head_end + 2);
      const std::size_t length = std::strtoull(r.header("content-length").c_str(), nullptr, 10);
      in.erase(0, head_end + 4);
      while (in.size() < length) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) goto done;
        bytes_received_ += static_cast<std::uint64_t>(n);
        in.append(buf, static_cast<std::size_t>(n));
      }
      r.body = in.substr(0, length);
      in.erase(0, length);
      if (r.head.rfind("GET /metrics", 0) == 0) {
        std::optional<std::string> text;
        {
          std::lock_guard<std::mutex> lock(mu_);
          text = metrics_;
        }
        if (!send_all(fd, text ? response(200, *text) : response(404, "{}"))) goto done;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(r);
      }
      Reply reply = responder_(r);
      std::string last = std::move(reply.bytes);
      if (reply.then) {
        if (!last.empty() && !send_all(fd, last)) goto failed;
        last = reply.then();
      }
      if (reply.close_after && reply.close_with_bytes) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
      }
      if (!last.empty() && !send_all(fd, last)) goto failed;
      for (std::string part; reply.next && reply.next(part); part.clear())
        if (!part.empty() && !send_all(fd, part)) goto failed;
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
