// A real DNS server for tests: Debian's dnsmasq, started on a free loopback
// port (UDP and TCP) and serving names from a hosts file the test rewrites
// (SIGHUP re-reads it). Without dnsmasq a test fails under make test and
// skips elsewhere (support/requires.h).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "datalayer/dns_watcher.h"
#include "support/process.h"

namespace sluice::test {

inline const char* dnsmasq_bin() {
  for (const char* p : {"/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"})
    if (access(p, X_OK) == 0) return p;
  return nullptr;
}

// Where dnsmasq comes from, for a test that needs it (support/requires.h).
inline constexpr const char* kDnsmasqPackage =
    "Debian package dnsmasq; scripts/install-deps.sh installs it";

// A port nothing is bound to right now, for UDP and TCP both (dnsmasq
// listens on both; a TCP listener of a test running beside this one may
// hold a number that is free for UDP).
inline std::uint16_t free_dns_port() {
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
    // could not bind. Each try is bounded by the resolver's timeout.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (process_->running()) {
      if (datalayer::resolve_dns({"probe.test.", 1}, options()).ok) return true;
      if (std::chrono::steady_clock::now() >= deadline) break;
      poll(nullptr, 0, 10);  // not listening yet (refused at once): try again shortly
    }
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
    o.timeout = std::chrono::milliseconds(1000);
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

}  // namespace sluice::test
