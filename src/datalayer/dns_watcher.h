// DNS discovery (`endpoints: - dns: NAME:PORT`): each name's A and AAAA
// records, looked up again every interval on this watcher's own thread (a
// slow or dead DNS server costs that thread its timeout, nothing else), the
// way Kubernetes headless Services and most registries expose pods. The
// addresses of every name go to `on_change` whenever one of them changed.
// A lookup that fails (timeout, SERVFAIL) keeps the name's last addresses:
// a DNS outage never empties the pool; a name that does not exist
// (NXDOMAIN) or has no address has none.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace sluice::datalayer {

struct DnsName {
  std::string name;
  std::uint16_t port = 0;
};

struct DnsOptions {
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{2000};  // per query (A, then AAAA)
  // "IPv4:PORT" servers to ask; empty: the system's (/etc/resolv.conf).
  std::vector<std::string> servers;
  std::size_t max_addresses = 256;  // per name; more are ignored (sorted, first kept)
};

// One lookup's result: addresses as "IP:PORT" ("[v6]:PORT"), sorted.
struct DnsResult {
  bool ok = false;  // false: the lookup failed (the last addresses stay)
  std::vector<std::string> addresses;
  std::string error;
};

// Looks `name` up once (blocking, bounded by options.timeout per query).
DnsResult resolve_dns(const DnsName& name, const DnsOptions& options);

// Adds to `out` the addresses ("IP:PORT", "[v6]:PORT") of the records of
// `type` (ns_t_a or ns_t_aaaa) in the answer section of the DNS message
// msg[0, len). Every read stays within it: a message cut short gives the
// records that arrived whole. False: not even its header and question.
bool parse_dns_answer(const unsigned char* msg, std::size_t len, int type, std::uint16_t port,
                      std::set<std::string>& out);

class DnsWatcher {
 public:
  // `on_change(addresses by name, in the order given)`, on the watcher's thread.
  using OnChange = std::function<void(const std::vector<std::vector<std::string>>&)>;
  using OnError = std::function<void(const std::string&)>;

  DnsWatcher(std::vector<DnsName> names, DnsOptions options, OnChange on_change,
             OnError on_error = {});
  ~DnsWatcher();
  void start();
  void stop();

 private:
  void run();
  std::vector<DnsName> names_;
  DnsOptions options_;
  OnChange on_change_;
  OnError on_error_;
  std::vector<std::vector<std::string>> current_;
  std::vector<bool> failing_;
  bool first_ = true;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::datalayer
