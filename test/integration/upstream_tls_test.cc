// TLS towards the model servers (server.upstreamTls, endpoints[].tls): the
// HTTPS model server is a second sluice whose TLS listener (server.tls,
// with a certificate of support/tls_client.h's test CA) fronts sluice-mock;
// the sluice under test talks to it over TLS, verifying it.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "support/tls_client.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

std::string dir_of(const TempFile& f) { return f.path().substr(0, f.path().rfind('/')); }

const std::string kChat =
    R"({"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":3})";
const std::string kStreamedChat =
    R"({"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":3,)"
    R"("stream":true})";

// sluice-mock behind a sluice TLS listener: an HTTPS model server.
struct HttpsEngine {
  explicit HttpsEngine(const TestPki& pki) : HttpsEngine(pki.server_cert(), pki.server_key()) {}
  HttpsEngine(const std::string& cert, const std::string& key)
      : mock(start_mock()),
        cfg(make_config({mock->address()},
                        "  tls:\n    listen: 127.0.0.1:0\n    certificateFile: " + cert +
                            "\n    keyFile: " + key + "\n")),
        front(start_sluice(cfg)) {}
  std::string address() const { return "127.0.0.1:" + std::to_string(front->tls_port()); }
  double handshakes() const {
    return scrape_metric(kHost, front->admin_port(), "sluice_tls_handshakes_total{result=\"ok\"}");
  }
  std::unique_ptr<Process> mock;
  TempFile cfg;
  std::unique_ptr<Process> front;
};

void write_config(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

double connect_errors(const Process& sluice, const std::string& endpoint) {
  return scrape_metric(
      kHost, sluice.admin_port(),
      "sluice_upstream_errors_total{endpoint=\"" + endpoint + "\",kind=\"connect\"}");
}

TEST(UpstreamTls, ChatWholeAndStreamedOverOneVerifiedTlsConnection) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  HttpsEngine engine(pki);
  ASSERT_NE(engine.front->tls_port(), 0);
  TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + pki.ca() + "}\n"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  auto whole = c.post_json("/v1/chat/completions", kChat);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(nlohmann::json::parse(whole.body)["object"], "chat.completion") << whole.body;
  auto streamed = c.post_json("/v1/chat/completions", kStreamedChat);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_NE(streamed.body.find("data: [DONE]"), std::string::npos) << streamed.body;
  auto again = c.post_json("/v1/chat/completions", kChat);
  EXPECT_EQ(again.status, 200) << again.body;
  // Three requests, one TLS connection: the pooled one was reused. (The
  // engine also sees the metrics scraper's own TLS connection.)
  auto connections = [&](const std::string& kind) {
    return scrape_metric(kHost, sluice->admin_port(),
                         "sluice_upstream_connections_total{endpoint=\"" + engine.address() +
                             "\",connection=\"" + kind + "\"}");
  };
  EXPECT_EQ(connections("new"), 1.0);
  EXPECT_EQ(connections("reused"), 2.0);
  EXPECT_GE(engine.handshakes(), 1.0);
  EXPECT_EQ(connect_errors(*sluice, engine.address()), 0.0);
}

TEST(UpstreamTls, AnUnverifiedServerIsAConnectFailureNotAHang) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  TempFile other_work("", "openssl.log");
  TestPki other(dir_of(other_work));  // another CA: it vouches for nothing here
  ASSERT_TRUE(other.ok()) << other.error();
  HttpsEngine engine(pki);
  for (const std::string& tls :
       {"{caFile: " + other.ca() + "}", "{caFile: " + pki.ca() + ", serverName: wrong.example}"}) {
    SCOPED_TRACE(tls);
    TempFile cfg(make_config({engine.address()}, "  upstreamTls: " + tls + "\n"));
    auto sluice = start_sluice(cfg);
    HttpClient c(kHost, sluice->port());
    const auto start = Clock::now();
    auto r = c.post_json("/v1/chat/completions", kChat);
    EXPECT_TRUE(r.status == 502 || r.status == 503) << r.status << " " << r.body;
    EXPECT_LT(Clock::now() - start, 5s);
    EXPECT_GE(connect_errors(*sluice, engine.address()), 1.0);
  }
  EXPECT_EQ(engine.handshakes(), 0.0);
  // insecureSkipVerify: the same wrong CA is not asked.
  TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + other.ca() +
                                                   ", insecureSkipVerify: true}\n"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/chat/completions", kChat).status, 200);
}

// An engine addressed by IP must present a certificate naming that IP (a
// certificate of the right CA for another name or IP is refused): the
// check of issue 39, item 11, that no test covered.
TEST(UpstreamTls, AnEngineAddressedByIpMustHaveThatIpInItsCertificate) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(pki.issue_server("dns-only", "DNS:localhost")) << pki.error();
  ASSERT_TRUE(pki.issue_server("other-ip", "IP:127.0.0.2,DNS:localhost")) << pki.error();
  for (const std::string name : {"dns-only", "other-ip"}) {
    SCOPED_TRACE(name);
    HttpsEngine engine(pki.path(name + ".pem"), pki.path(name + ".key"));
    ASSERT_NE(engine.front->tls_port(), 0);
    TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + pki.ca() + "}\n"));
    auto sluice = start_sluice(cfg);
    HttpClient c(kHost, sluice->port());
    auto r = c.post_json("/v1/chat/completions", kChat);
    EXPECT_TRUE(r.status == 502 || r.status == 503) << r.status << " " << r.body;
    EXPECT_GE(connect_errors(*sluice, engine.address()), 1.0);
    EXPECT_EQ(engine.handshakes(), 0.0);
    // The same certificate verified by the name it holds: served (the CA
    // and the chain are good; only the IP was missing).
    TempFile named(make_config(
        {engine.address()}, "  upstreamTls: {caFile: " + pki.ca() + ", serverName: localhost}\n"));
    auto by_name = start_sluice(named);
    HttpClient n(kHost, by_name->port());
    EXPECT_EQ(n.post_json("/v1/chat/completions", kChat).status, 200);
  }
  // A certificate with the IP (IP:127.0.0.1): served by address.
  HttpsEngine engine(pki);
  TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + pki.ca() + "}\n"));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/chat/completions", kChat).status, 200);
}

TEST(UpstreamTls, AnEndpointsOwnSettingOverridesThePoolsAndABadCaFileIsAConfigError) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  HttpsEngine engine(pki);
  // The pool's setting names a CA that does not exist; the endpoint's own
  // is the right one, and serverName localhost is in the certificate.
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  upstreamTls: {enabled: false}\n"
      "endpoints:\n  - address: " +
      engine.address() + "\n    tls: {caFile: " + pki.ca() + ", serverName: localhost}\n");
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/chat/completions", kChat).status, 200);

  TempFile bad(make_config({engine.address()}, "  upstreamTls: {caFile: /nonexistent/ca.pem}\n"));
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start({SLUICE_BIN, "--config", bad.path(), "--admin-listen", "127.0.0.1:0"}, o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->wait(20000ms), 2);  // a config error, not a crash
  EXPECT_NE(p->stderr_text().find("/nonexistent/ca.pem"), std::string::npos) << p->stderr_text();
}

// A reload reads the settings and files again: new connections use them; a
// setting whose file does not load fails the reload and the running one stays.
TEST(UpstreamTls, AReloadAppliesNewSettingsAndABadFileKeepsTheRunningOnes) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  TempFile other_work("", "openssl.log");
  TestPki other(dir_of(other_work));
  ASSERT_TRUE(other.ok()) << other.error();
  HttpsEngine engine(pki);
  auto config_with = [&](const std::string& ca) {
    return make_config({engine.address()}, "  upstreamTls: {caFile: " + ca + "}\n");
  };
  TempFile cfg(config_with(other.ca()));
  auto sluice = start_sluice(cfg);
  HttpClient c(kHost, sluice->port());
  HttpClient admin(kHost, sluice->admin_port());
  auto refused = c.post_json("/v1/chat/completions", kChat);
  EXPECT_TRUE(refused.status == 502 || refused.status == 503) << refused.status;
  write_config(cfg.path(), config_with(pki.ca()));
  auto r = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(r.status, 200) << r.body;
  // The endpoint was marked down by the failure: served once it is back.
  EXPECT_TRUE(eventually([&] { return c.post_json("/v1/chat/completions", kChat).status == 200; },
                         10000ms));
  write_config(cfg.path(), config_with("/nonexistent/ca.pem"));
  auto bad = admin.request("POST", "/admin/v1/reload");
  EXPECT_NE(bad.status, 200) << bad.body;
  EXPECT_NE(bad.body.find("/nonexistent/ca.pem"), std::string::npos) << bad.body;
  EXPECT_EQ(c.post_json("/v1/chat/completions", kChat).status, 200);
}

}  // namespace
}  // namespace sluice::test
