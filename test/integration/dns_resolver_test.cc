// The DNS watcher's resolver against a real server (issue 33): Debian's
// dnsmasq with names of hundreds of A records (answers far larger than a
// UDP datagram: EDNS0, then TCP).
// Only sluice_datalayer: no sluice binary is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "datalayer/dns_watcher.h"
#include "support/dnsmasq.h"

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
  void SetUp() override {
    if (!dnsmasq_bin()) GTEST_SKIP() << kNoDnsmasq;
  }
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

}  // namespace
}  // namespace sluice::test
