// DNS discovery (`endpoints: - dns: NAME:PORT`): each name's A and AAAA
// records, looked up again every interval on this watcher's own thread (a
// slow or dead DNS server costs that thread its timeout, nothing else), the
// way Kubernetes headless Services and most registries expose pods. The
// addresses of every name go to `on_change` whenever one of them changed.
// A and AAAA are separate queries and each keeps its own last answer: a
// query that fails (timeout, SERVFAIL) keeps that type's last addresses
// while the other type's fresh answer is used (a resolver that drops AAAA
// queries costs nothing but the timeout), so a DNS outage never empties
// the pool; a name that does not exist (NXDOMAIN) or has no address of a
// type (NODATA) has none of it.
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
  std::chrono::milliseconds timeout{2000};  // per query (A, then AAAA: both always asked)
  // "IPv4:PORT" servers to ask; empty: the system's (/etc/resolv.conf).
  std::vector<std::string> servers;
  std::size_t max_addresses = 256;  // per name; more are ignored (sorted, first kept)
};

// One record type's query: addresses as "IP:PORT" ("[v6]:PORT"), sorted,
// the first max_addresses (enough for the union's).
struct DnsAnswer {
  bool ok = false;  // false: no answer (the type's last addresses stay)
  std::vector<std::string> addresses;
  std::string error;
};

// One lookup of a name: each type's answer, and the union of those that
// answered (sorted, the first max_addresses).
struct DnsResult {
  DnsAnswer a, aaaa;
  bool ok = false;  // at least one type answered; false: the lookup failed
  std::vector<std::string> addresses;
  std::string error;  // why a type had no answer ("AAAA: ..."), if one had none
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
  // Per name: each type's last answer and whether its query is failing
  // (said once per outage of a type).
  struct Kept {
    std::vector<std::string> a, aaaa;
    bool a_failing = false, aaaa_failing = false;
  };
  std::vector<Kept> kept_;
  std::vector<std::vector<std::string>> current_;  // per name: the union, as last delivered
  bool first_ = true;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::datalayer
