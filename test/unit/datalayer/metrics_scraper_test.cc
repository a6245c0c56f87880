// MetricsScraper against servers of the test's own on 127.0.0.1 (port 0):
// the credential sent, one connection kept alive between scrapes, a
// target's settings changed by update() (a new connection only when they
// differ), and the timeout bounding a TLS handshake that never ends. Waits
// are for what the scraper thread does, each bounded.
#include "datalayer/metrics_scraper.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice::datalayer {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A listening socket on 127.0.0.1:0 (backlog 16): connections complete in
// the kernel whether or not anyone accepts them.
int listen_loopback(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

// Answers every GET with vLLM metrics over keep-alive connections (one
// thread; one connection at a time, the next accepted when it closes) and
// records each request head and how many connections came.
class MetricsServer {
 public:
  MetricsServer() : fd_(listen_loopback(port_)) {
    thread_ = std::thread([this] { run(); });
  }
  ~MetricsServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }

 private:
  void run() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      serve(c);
      ::close(c);
    }
  }
  void serve(int c) {
    const std::string body = "vllm:num_requests_waiting{model_name=\"m\"} 3\n";
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    std::string in;
    char buf[4096];
    while (!stopping_) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 100) == 0) continue;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<std::size_t>(n));
      for (std::size_t end; (end = in.find("\r\n\r\n")) != std::string::npos;) {
        {
          std::lock_guard lock(mu_);
          heads_.push_back(in.substr(0, end + 2));
        }
        in.erase(0, end + 4);
        if (::send(c, answer.data(), answer.size(), MSG_NOSIGNAL) <= 0) return;
      }
    }
  }

  std::uint16_t port_ = 0;
  int fd_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::thread thread_;
};

ScrapeTarget target_at(std::uint16_t port) {
  ScrapeTarget t;
  t.address = {boost::asio::ip::make_address("127.0.0.1"), port};
  t.host_port = "127.0.0.1:" + std::to_string(port);
  t.host = "127.0.0.1";
  t.engine = "vllm";
  return t;
}

struct Scraped {
  std::atomic<int> count{0};
  MetricsScraper::Sink sink() {
    return [this](std::size_t, const EngineMetrics& m) {
      if (m.waiting == 3) ++count;
    };
  }
};

TEST(MetricsScraper, SendsTheCredentialOverOneKeptAliveConnection) {
  MetricsServer server;
  Scraped scraped;
  ScrapeTarget t = target_at(server.port());
  t.authorization = "Bearer engine-key";
  ScraperOptions o;
  o.interval = 5ms;
  MetricsScraper scraper({t}, o, scraped.sink());
  scraper.start();
  ASSERT_TRUE(eventually([&] { return scraped.count >= 5; }));
  EXPECT_EQ(server.connections(), 1);
  for (const auto& head : server.heads())
    EXPECT_NE(head.find("\r\nAuthorization: Bearer engine-key\r\n"), std::string::npos) << head;
  EXPECT_EQ(scraper.failures(), 0u);
}

// update() with the same settings keeps the connection; with another
// credential the next scrapes come on a new connection and carry it.
TEST(MetricsScraper, AnUpdatedTargetReconnectsOnlyWhenItsSettingsDiffer) {
  MetricsServer server;
  Scraped scraped;
  ScrapeTarget t = target_at(server.port());
  t.authorization = "Bearer first";
  ScraperOptions o;
  o.interval = 5ms;
  MetricsScraper scraper({t}, o, scraped.sink());
  scraper.start();
  ASSERT_TRUE(eventually([&] { return scraped.count >= 2; }));
  scraper.update(0, t);
  int before = scraped.count;
  ASSERT_TRUE(eventually([&] { return scraped.count >= before + 3; }));
  EXPECT_EQ(server.connections(), 1);
  t.authorization = "Bearer second";
  scraper.update(0, t);
  ASSERT_TRUE(eventually([&] {
    const auto heads = server.heads();
    return heads.back().find("Bearer second") != std::string::npos;
  }));
  before = scraped.count;
  ASSERT_TRUE(eventually([&] { return scraped.count >= before + 3; }));
  // The old connection closed (the server accepts one at a time).
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.heads().back().find("Bearer first"), std::string::npos);
  EXPECT_EQ(scraper.failures(), 0u);  // the replaced target's scrape is not a failure
}

// A server that never answers the handshake (nobody accepts: the kernel
// completes the TCP connection, the ClientHello waits): each scrape fails
// after the timeout, not before, and the next one tries again.
TEST(MetricsScraper, TheTimeoutBoundsATlsHandshakeThatNeverEnds) {
  std::uint16_t port = 0;
  const int silent = listen_loopback(port);
  config::Config c;
  c.server.upstream_tls.enabled = true;
  c.server.upstream_tls.insecure_skip_verify = true;
  std::string error;
  auto tls = build_upstream_tls(c, error);
  ASSERT_NE(tls, nullptr) << error;
  ScrapeTarget t = target_at(port);
  t.tls = tls->pool;
  Scraped scraped;
  ScraperOptions o;
  o.interval = 5ms;
  o.timeout = 100ms;
  MetricsScraper scraper({t}, o, scraped.sink());
  const auto start = Clock::now();
  scraper.start();
  ASSERT_TRUE(eventually([&] { return scraper.failures() >= 2; }));
  EXPECT_GE(Clock::now() - start, 200ms);
  EXPECT_EQ(scraped.count, 0);
  scraper.stop();
  ::close(silent);
}

}  // namespace
}  // namespace sluice::datalayer
