// DNS discovery against a real DNS server: Debian's dnsmasq, started here on
// a free loopback port and serving names from a hosts file the test
// rewrites (SIGHUP re-reads it). Endpoints join and leave as their records
// do; a DNS server that stops answering keeps the pool as it was.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "datalayer/dns_watcher.h"
#include "harness.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

const char* dnsmasq_bin() {
  for (const char* p : {"/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"})
    if (access(p, X_OK) == 0) return p;
  return nullptr;
}

// A port nothing is bound to right now, for UDP and TCP both (dnsmasq
// listens on both; a TCP listener of a test running beside this one may
// hold a number that is free for UDP).
std::uint16_t free_dns_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int udp = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(udp, reinterpret_cast<sockaddr*>(&a), &len);
    const int tcp = socket(AF_INET, SOCK_STREAM, 0);
    const bool both = bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(tcp);
    close(udp);
    if (both) return ntohs(a.sin_port);
  }
  return 0;
}

class Dnsmasq {
 public:
  explicit Dnsmasq(const std::string& hosts_text) : hosts_(hosts_text, "hosts") {}
  // Starts it (again on another port if the one chosen was taken meanwhile).
  bool start() {
    for (int attempt = 0; attempt < 3; ++attempt)
      if (start_once()) return true;
    return false;
  }
  bool start_once() {
    port_ = free_dns_port();
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    std::vector<std::string> argv = {dnsmasq_bin(),
                                     "--keep-in-foreground",
                                     "--conf-file=/dev/null",
                                     "--port=" + std::to_string(port_),
                                     "--listen-address=127.0.0.1",
                                     "--bind-interfaces",
                                     "--no-resolv",
                                     "--no-hosts",
                                     "--addn-hosts=" + hosts_.path(),
                                     "--pid-file=",
                                     "--local-ttl=0",
                                     "--local=/test/",
                                     "--log-facility=/dev/null"};
    // As root it would switch to the dnsmasq user, who cannot read our file.
    if (getuid() == 0) argv.push_back("--user=root");
    process_ = Process::start(argv, o);
    if (!process_) return false;
    // Up once it answers (a name it does not know: NXDOMAIN is an answer;
    // absolute, so the machine's search domains are not tried); gone if it
    // could not bind.
    const bool up = eventually([&] {
      return !process_->running() || datalayer::resolve_dns({"probe.test.", 1}, options()).ok;
    });
    if (up && process_->running()) return true;
    process_.reset();
    return false;
  }
  // Replaces the hosts file's contents and has dnsmasq read it again.
  void set_hosts(const std::string& text) {
    std::ofstream(hosts_.path(), std::ios::trunc) << text;
    ::kill(process_->pid(), SIGHUP);
  }
  void kill() {
    process_->stop(SIGKILL);
    process_.reset();
  }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  datalayer::DnsOptions options() const {
    datalayer::DnsOptions o;
    o.servers = {server()};
    o.timeout = 1000ms;
    return o;
  }
  ~Dnsmasq() {
    if (process_) process_->stop(SIGTERM);
  }

 private:
  TempFile hosts_;
  std::uint16_t port_ = 0;
  std::unique_ptr<Process> process_;
};

class DnsDiscovery : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dnsmasq_bin())
      GTEST_SKIP() << "dnsmasq is not installed (scripts/install-deps.sh installs it)";
  }
};

TEST_F(DnsDiscovery, ResolvesAAndAaaaRecordsNoSuchNameAndADeadServer) {
  Dnsmasq dns("127.0.0.1 model.test\n127.0.0.2 model.test\n::1 model.test\n");
  ASSERT_TRUE(dns.start());
  auto r = datalayer::resolve_dns({"model.test", 8000}, dns.options());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.addresses,
            (std::vector<std::string>{"127.0.0.1:8000", "127.0.0.2:8000", "[::1]:8000"}));
  auto none = datalayer::resolve_dns({"nothing.test.", 8000}, dns.options());
  EXPECT_TRUE(none.ok) << "NXDOMAIN is an answer: " << none.error;
  EXPECT_TRUE(none.addresses.empty());
  dns.kill();
  const auto start = std::chrono::steady_clock::now();
  auto dead = datalayer::resolve_dns({"model.test", 8000}, dns.options());
  EXPECT_FALSE(dead.ok) << "no server: a failure, not an empty answer";
  EXPECT_FALSE(dead.error.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "bounded by the timeout";
}

std::set<std::string> live_endpoints(const Process& sluice) {
  HttpClient admin("127.0.0.1", sluice.admin_port());
  auto r = admin.request("GET", "/admin/v1/endpoints");
  std::set<std::string> out;
  if (r.status != 200) return out;
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j)
    if (!e.value("removed", true)) out.insert(e.value("address", ""));
  return out;
}

TEST_F(DnsDiscovery, EndpointsJoinAndLeaveWithTheirRecordsAndSurviveADnsOutage) {
  auto m1 = start_mock();
  ASSERT_TRUE(m1);
  const std::string port = m1->address().substr(m1->address().rfind(':') + 1);
  auto m2 = start_mock({"--listen", "127.0.0.2:" + port});  // the same port, another address
  ASSERT_TRUE(m2);
  const std::string a1 = "127.0.0.1:" + port, a2 = "127.0.0.2:" + port;
  Dnsmasq dns("127.0.0.1 model.test\n");
  ASSERT_TRUE(dns.start());
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  dnsRefreshInterval: 50ms\n"
      "  dnsTimeout: 500ms\n  dnsServers: [" +
      dns.server() +
      "]\n"
      "endpoints:\n  - dns: model.test:" +
      port + "\n    labels: {pool: discovered}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  EXPECT_TRUE(eventually([&] { return live_endpoints(*sluice) == std::set<std::string>{a1}; }));
  HttpClient client("127.0.0.1", sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(2)).status, 200);

  dns.set_hosts("127.0.0.1 model.test\n127.0.0.2 model.test\n");
  EXPECT_TRUE(eventually([&] { return live_endpoints(*sluice) == std::set<std::string>{a1, a2}; }));
  dns.set_hosts("127.0.0.2 model.test\n");
  EXPECT_TRUE(eventually([&] { return live_endpoints(*sluice) == std::set<std::string>{a2}; }));
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(2)).status, 200);

  // DNS gone: the pool stays as it was, and so does service.
  dns.kill();
  HttpClient admin("127.0.0.1", sluice->admin_port());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(client.post_json("/v1/completions", completion_body(2)).status, 200);
    EXPECT_EQ(live_endpoints(*sluice), std::set<std::string>{a2});
  }
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
