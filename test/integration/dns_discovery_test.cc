// DNS discovery against a real DNS server: Debian's dnsmasq
// (support/dnsmasq.h), serving names from a hosts file the test rewrites.
// Endpoints join and leave as their records do; a DNS server that stops
// answering keeps the pool as it was. The resolver on its own (large
// answers, partial ones): dns_resolver_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "datalayer/dns_watcher.h"
#include "harness.h"
#include "support/dnsmasq.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

class DnsDiscovery : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_REQUIRE(dnsmasq_bin(), "dnsmasq", kDnsmasqPackage); }
};

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
  // The admin list shows an endpoint as it is added, the dispatcher learns
  // the pool a moment later (seen under TSan): served once it has.
  EXPECT_TRUE(eventually(
      [&] { return client.post_json("/v1/completions", completion_body(2)).status == 200; }));

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
