// The DNS watcher's resolver against real servers (issue 33): Debian's
// dnsmasq with names of hundreds of A records (answers far larger than a
// UDP datagram: EDNS0, then TCP), and a tiny DNS server of this test's own
// that answers A and never AAAA (a resolver that drops AAAA queries).
// Only sluice_datalayer: no sluice binary is needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "datalayer/dns_watcher.h"
#include "support/dnsmasq.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Addresses = std::vector<std::string>;

// `count` distinct IPv4 addresses for `name`, as hosts-file lines, and
// their "IP:PORT" forms sorted as the watcher sorts them (as strings).
struct ManyRecords {
  std::string hosts;
  Addresses sorted;
};
ManyRecords many_records(const std::string& name, int count, int second_octet, int port) {
  ManyRecords m;
  for (int i = 0; i < count; ++i) {
    const std::string ip = "10." + std::to_string(second_octet) + "." + std::to_string(i / 250) +
                           "." + std::to_string(i % 250 + 1);
    m.hosts += ip + " " + name + "\n";
    m.sorted.push_back(ip + ":" + std::to_string(port));
  }
  std::sort(m.sorted.begin(), m.sorted.end());
  return m;
}

Addresses first(const Addresses& sorted, std::size_t n) {
  return Addresses(sorted.begin(), sorted.begin() + std::min(n, sorted.size()));
}

// What a watcher delivered: every on_change and on_error, waited on with a
// deadline (the condition is the watcher's, the deadline the test's bound).
class Recorder {
 public:
  datalayer::DnsWatcher::OnChange on_change() {
    return [this](const std::vector<Addresses>& found) {
      std::lock_guard<std::mutex> lock(mu_);
      changes_.push_back(found);
      cv_.notify_all();
    };
  }
  datalayer::DnsWatcher::OnError on_error() {
    return [this](const std::string& message) {
      std::lock_guard<std::mutex> lock(mu_);
      errors_.push_back(message);
    };
  }
  // Until the last delivery equals `want`; false after `timeout`.
  bool wait_for(const std::vector<Addresses>& want, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout,
                        [&] { return !changes_.empty() && changes_.back() == want; });
  }
  std::vector<std::vector<Addresses>> changes() {
    std::lock_guard<std::mutex> lock(mu_);
    return changes_;
  }
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<Addresses>> changes_;
  std::vector<std::string> errors_;
};

std::string describe(const std::vector<std::vector<Addresses>>& changes) {
  std::string out;
  for (const auto& c : changes) {
    out += "{";
    for (const auto& name : c) {
      out += " [";
      for (const auto& a : name) out += a + " ";
      out += "]";
    }
    out += " }\n";
  }
  return out.empty() ? "nothing delivered" : out;
}

class DnsResolver : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE(dnsmasq_bin(), "dnsmasq", kDnsmasqPackage); }
};

TEST_F(DnsResolver, ResolvesAAndAaaaRecordsNoSuchNameAndADeadServer) {
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

// 600 A records are about 9.6 KB of answer: past a 512-byte datagram, past
// EDNS0's 1200 bytes (TCP, then) and past the 8 KiB buffer the resolver
// had, which lost the whole name. 256 are kept: the first, sorted.
TEST_F(DnsResolver, ANameWithHundredsOfRecordsGivesTheFirst256Sorted) {
  const auto many = many_records("many.test", 600, 1, 8000);
  const auto mid = many_records("mid.test", 300, 2, 8000);
  const auto few = many_records("few.test", 40, 3, 8000);
  Dnsmasq dns(many.hosts + mid.hosts + few.hosts);
  ASSERT_TRUE(dns.start());
  const auto options = dns.options();
  ASSERT_EQ(options.max_addresses, 256u);

  auto r = datalayer::resolve_dns({"many.test.", 8000}, options);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.addresses.size(), 256u);
  EXPECT_EQ(r.addresses, first(many.sorted, 256));

  auto m = datalayer::resolve_dns({"mid.test.", 8000}, options);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.addresses, first(mid.sorted, 256));

  auto f = datalayer::resolve_dns({"few.test.", 8000}, options);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_EQ(f.addresses, few.sorted);

  // The watcher delivers them too (the pool at startup).
  Recorder rec;
  auto o = options;
  o.interval = 50ms;
  datalayer::DnsWatcher watcher({{"many.test.", 8000}, {"mid.test.", 8000}, {"few.test.", 8000}}, o,
                                rec.on_change(), rec.on_error());
  watcher.start();
  EXPECT_TRUE(rec.wait_for({first(many.sorted, 256), first(mid.sorted, 256), few.sorted}))
      << describe(rec.changes());
  watcher.stop();
  EXPECT_TRUE(rec.errors().empty()) << rec.errors().front();
}

// A DNS answer as a server sends it: header, the question (svc.test. IN
// A), then the records, each naming the question's name by a pointer.
// `ends` gets the offset where each record ends.
std::vector<unsigned char> dns_answer(
    const std::vector<std::pair<int, std::vector<unsigned char>>>& rrs,
    std::vector<std::size_t>& ends) {
  std::vector<unsigned char> m = {
      0x12, 0x34, 0x81, 0x80, 0, 1, 0, static_cast<unsigned char>(rrs.size()), 0, 0, 0, 0};
  for (const char* label : {"svc", "test"}) {
    m.push_back(static_cast<unsigned char>(std::strlen(label)));
    m.insert(m.end(), label, label + std::strlen(label));
  }
  m.insert(m.end(), {0, 0, 1, 0, 1});
  for (const auto& [type, rdata] : rrs) {
    m.insert(m.end(), {0xc0, 12, 0, static_cast<unsigned char>(type), 0, 1, 0, 0, 0, 0, 0,
                       static_cast<unsigned char>(rdata.size())});
    m.insert(m.end(), rdata.begin(), rdata.end());
    ends.push_back(m.size());
  }
  return m;
}

// An answer cut anywhere (the resolver cuts one that outgrows its buffer,
// keeping the header's counts) gives the records that arrived whole, and
// nothing is read past its end (each cut is a heap block of its own size:
// ASan sees a read past it).
TEST(DnsParse, AnAnswerCutShortGivesTheRecordsThatArrivedWhole) {
  std::vector<std::pair<int, std::vector<unsigned char>>> rrs;
  rrs.push_back({5, {0xc0, 12}});  // a CNAME first: not an address
  for (unsigned char i = 1; i <= 10; ++i) rrs.push_back({1, {10, 9, 0, i}});
  rrs.push_back({28, {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}});
  std::vector<std::size_t> ends;
  const auto whole = dns_answer(rrs, ends);
  const std::size_t question_end = 12 + 10 + 4;
  for (std::size_t len = 0; len <= whole.size(); ++len) {
    const std::unique_ptr<unsigned char[]> cut(new unsigned char[std::max<std::size_t>(len, 1)]);
    std::copy(whole.begin(), whole.begin() + len, cut.get());
    std::set<std::string> a, aaaa;
    const bool ok = datalayer::parse_dns_answer(cut.get(), len, 1, 80, a);
    EXPECT_EQ(datalayer::parse_dns_answer(cut.get(), len, 28, 80, aaaa), ok);
    if (len < question_end) {
      EXPECT_FALSE(ok) << len;
      continue;
    }
    ASSERT_TRUE(ok) << len;
    std::size_t whole_a = 0;
    for (std::size_t i = 1; i <= 10; ++i) whole_a += ends[i] <= len;
    EXPECT_EQ(a.size(), whole_a) << len;
    if (whole_a > 0) {
      EXPECT_EQ(a.count("10.9.0.1:80"), 1u) << len;
    }
    EXPECT_EQ(aaaa.size(), ends[11] <= len ? 1u : 0u) << len;
  }
  std::set<std::string> aaaa;
  ASSERT_TRUE(datalayer::parse_dns_answer(whole.data(), whole.size(), 28, 80, aaaa));
  EXPECT_EQ(aaaa, (std::set<std::string>{"[fd00::1]:80"}));
}

// A DNS server over UDP on 127.0.0.1 (a port of its own), on a thread of
// its own: each name's A and AAAA records, or no answer at all for a type
// set to drop (a server or middlebox that loses AAAA queries). Unknown
// names are NXDOMAIN; a known name without records of a type is NODATA.
class FakeDns {
 public:
  struct Zone {
    std::vector<std::string> a, aaaa;  // addresses as text
    bool drop_a = false, drop_aaaa = false;
  };

  FakeDns() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    socklen_t len = sizeof addr;
    if (bound_ && getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      port_ = ntohs(addr.sin_port);
    if (bound_) thread_ = std::thread([this] { serve(); });
  }
  ~FakeDns() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  FakeDns(const FakeDns&) = delete;
  FakeDns& operator=(const FakeDns&) = delete;

  bool ok() const { return bound_ && port_ != 0; }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  // Names are absolute and lower case ("svc.test.").
  void set(const std::string& name, Zone zone) {
    std::lock_guard<std::mutex> lock(mu_);
    zones_[name] = std::move(zone);
  }
  void remove(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    zones_.erase(name);
  }
  // Queries received for `name` of `type` (ns_t_a = 1, ns_t_aaaa = 28).
  int queries(const std::string& name, int type) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_[{name, type}];
  }
  // Until `queries(name, type) >= n`; false after `timeout`.
  bool wait_queries(const std::string& name, int type, int n,
                    std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return seen_[{name, type}] >= n; });
  }

 private:
  void serve() {
    unsigned char in[512];
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      // Bounded, so that the destructor's stop is seen within 50 ms.
      if (poll(&p, 1, 50) <= 0) continue;
      sockaddr_in from{};
      socklen_t from_len = sizeof from;
      const ssize_t n =
          recvfrom(fd_, in, sizeof in, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n <= 12) continue;
      std::vector<unsigned char> out;
      if (!answer(in, static_cast<std::size_t>(n), out)) continue;
      sendto(fd_, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), from_len);
    }
  }

  // The reply to one query; false: none (dropped or not understood).
  bool answer(const unsigned char* q, std::size_t n, std::vector<unsigned char>& out) {
    if ((q[4] << 8 | q[5]) != 1) return false;  // one question
    // The question's name: labels, uncompressed in a query.
    std::size_t p = 12;
    std::string name;
    while (p < n && q[p] != 0) {
      const std::size_t len = q[p];
      if (len > 63 || p + 1 + len >= n) return false;
      for (std::size_t i = 0; i < len; ++i) name += static_cast<char>(std::tolower(q[p + 1 + i]));
      name += '.';
      p += 1 + len;
    }
    if (p + 5 > n) return false;
    const std::size_t question_end = p + 5;
    const int type = q[p + 1] << 8 | q[p + 2];
    std::vector<std::string> records;
    int family = AF_INET;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++seen_[{name, type}];
      cv_.notify_all();
      auto it = zones_.find(name);
      if (it != zones_.end()) {
        known = true;
        if (type == 1) {
          if (it->second.drop_a) return false;
          records = it->second.a;
        } else if (type == 28) {
          if (it->second.drop_aaaa) return false;
          records = it->second.aaaa;
          family = AF_INET6;
        }
      }
    }
    // Header: the query's id, QR | RD (as asked) | RA, NXDOMAIN or
    // NOERROR, the question echoed (the resolver matches it), answers.
    out.assign(q, q + question_end);
    out[2] = 0x80 | (q[2] & 0x01);
    out[3] = 0x80 | (known ? 0 : 3);
    out[6] = 0;
    out[7] = static_cast<unsigned char>(records.size());
    out[8] = out[9] = out[10] = out[11] = 0;  // no authority, no additional (no OPT)
    for (const auto& text : records) {
      unsigned char rdata[16];
      const int len = family == AF_INET ? 4 : 16;
      if (inet_pton(family, text.c_str(), rdata) != 1) return false;
      const unsigned char rr[] = {0xc0,
                                  12,  // the question's name
                                  static_cast<unsigned char>(type >> 8),
                                  static_cast<unsigned char>(type & 0xff),
                                  0,
                                  1,  // IN
                                  0,
                                  0,
                                  0,
                                  0,  // TTL 0
                                  0,
                                  static_cast<unsigned char>(len)};
      out.insert(out.end(), rr, rr + sizeof rr);
      out.insert(out.end(), rdata, rdata + len);
    }
    return true;
  }

  int fd_ = -1;
  bool bound_ = false;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Zone> zones_;
  std::map<std::pair<std::string, int>, int> seen_;
  std::thread thread_;
};

datalayer::DnsOptions fake_options(const FakeDns& dns) {
  datalayer::DnsOptions o;
  o.servers = {dns.server()};
  o.timeout = 1000ms;  // the resolver's unit is a second: its least
  o.interval = 20ms;
  return o;
}

// The A answer is an answer even when the AAAA query gets none: a name is
// not lost because one of its record types cannot be looked up.
TEST(DnsPartialAnswers, AnAAnswerIsUsedWhenTheAaaaQueryTimesOut) {
  FakeDns dns;
  ASSERT_TRUE(dns.ok());
  dns.set("svc.test.", {{"10.0.0.2", "10.0.0.1"}, {"fd00::1"}, false, true});
  auto r = datalayer::resolve_dns({"svc.test.", 8000}, fake_options(dns));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.addresses, (Addresses{"10.0.0.1:8000", "10.0.0.2:8000"}));
  EXPECT_FALSE(r.error.empty()) << "the AAAA query's failure is told";
  EXPECT_EQ(dns.queries("svc.test.", 28), 1) << "AAAA was asked (once: one try)";

  // And the other way round: AAAA answers, A is lost.
  dns.set("svc.test.", {{"10.0.0.1"}, {"fd00::1"}, true, false});
  auto v6 = datalayer::resolve_dns({"svc.test.", 8000}, fake_options(dns));
  ASSERT_TRUE(v6.ok) << v6.error;
  EXPECT_EQ(v6.addresses, (Addresses{"[fd00::1]:8000"}));

  // Neither: a failure (the watcher keeps what it had).
  dns.set("svc.test.", {{"10.0.0.1"}, {"fd00::1"}, true, true});
  auto none = datalayer::resolve_dns({"svc.test.", 8000}, fake_options(dns));
  EXPECT_FALSE(none.ok);
  EXPECT_FALSE(none.error.empty());
}

// The watcher keeps the last answer of each record type: a type whose
// query fails keeps its last addresses while the other type's fresh
// answer is used; another name of the same watcher is untouched.
TEST(DnsPartialAnswers, TheWatcherKeepsEachRecordTypesLastAnswer) {
  FakeDns dns;
  ASSERT_TRUE(dns.ok());
  const std::string svc = "svc.test.", other = "other.test.";
  const Addresses other_addresses = {"10.0.1.1:9000", "[fd00:1::1]:9000"};
  dns.set(svc, {{"10.0.0.1", "10.0.0.2"}, {"fd00::1"}, false, true});
  dns.set(other, {{"10.0.1.1"}, {"fd00:1::1"}, false, false});
  Recorder rec;
  datalayer::DnsWatcher watcher({{svc, 8000}, {other, 9000}}, fake_options(dns), rec.on_change(),
                                rec.on_error());
  watcher.start();

  // AAAA never answered (from the start): the A addresses.
  EXPECT_TRUE(rec.wait_for({{"10.0.0.1:8000", "10.0.0.2:8000"}, other_addresses}))
      << describe(rec.changes());
  // Later rounds like it keep them (and say nothing more): two more rounds
  // begun means one more round ended, its on_change (if any) delivered.
  const auto delivered = rec.changes().size();
  const int round = dns.queries(svc, 1);
  EXPECT_TRUE(dns.wait_queries(svc, 1, round + 2));
  EXPECT_EQ(rec.changes().size(), delivered) << describe(rec.changes());
  EXPECT_EQ(rec.changes().back()[0], (Addresses{"10.0.0.1:8000", "10.0.0.2:8000"}));
  ASSERT_EQ(rec.errors().size(), 1u);
  EXPECT_NE(rec.errors()[0].find(svc), std::string::npos) << rec.errors()[0];
  EXPECT_NE(rec.errors()[0].find("AAAA"), std::string::npos) << rec.errors()[0];

  // AAAA answers: both types.
  dns.set(svc, {{"10.0.0.1", "10.0.0.2"}, {"fd00::1"}, false, false});
  EXPECT_TRUE(rec.wait_for({{"10.0.0.1:8000", "10.0.0.2:8000", "[fd00::1]:8000"}, other_addresses}))
      << describe(rec.changes());

  // AAAA lost again while A changes: the fresh A set with the last AAAA.
  dns.set(svc, {{"10.0.0.1", "10.0.0.3"}, {"fd00::2"}, false, true});
  EXPECT_TRUE(rec.wait_for({{"10.0.0.1:8000", "10.0.0.3:8000", "[fd00::1]:8000"}, other_addresses}))
      << describe(rec.changes());

  // And the other way round: A lost, AAAA answers again (a new set).
  dns.set(svc, {{"10.0.0.9"}, {"fd00::2"}, true, false});
  EXPECT_TRUE(rec.wait_for({{"10.0.0.1:8000", "10.0.0.3:8000", "[fd00::2]:8000"}, other_addresses}))
      << describe(rec.changes());

  // A name that does not exist any more (NXDOMAIN) is an answer with none,
  // for both types: gone, though nothing failed.
  dns.remove(svc);
  EXPECT_TRUE(rec.wait_for({{}, other_addresses})) << describe(rec.changes());
  watcher.stop();

  // Once per outage of a type: AAAA twice, A once; never the other name.
  const auto errors = rec.errors();
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) EXPECT_EQ(e.find(other), std::string::npos) << e;
  // Every delivery had the other name's addresses.
  for (const auto& c : rec.changes()) {
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[1], other_addresses);
  }
}

}  // namespace
}  // namespace sluice::test
