// The data layer reaches the model servers as the proxied requests do
// (issue 32): the metrics scraper and the model catalogue speak TLS to an
// endpoint whose upstream TLS is set (verified the same way) and send its
// upstream credential; a reload that turns an endpoint's TLS on or off
// moves its requests and its scrapes with it; a scrape that does not verify
// is a counted failure and nothing more; the upstream TLS files are read
// with a bound. The HTTPS engine is a FakeUpstream with a certificate of
// support/tls_client.h's test CA (and plain HTTP on the same port where a
// test switches between the two).
#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness.h"
#include "support/fake_upstream.h"
#include "support/tls_client.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

std::string dir_of(const TempFile& f) { return f.path().substr(0, f.path().rfind('/')); }

void write_config(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

FakeUpstream::Responder answer_ok() {
  return [](const UpstreamRequest& r) {
    if (r.head.rfind("GET /v1/models ", 0) == 0)
      return FakeUpstream::Reply{
          FakeUpstream::response(200, R"({"object":"list","data":[{"id":"tls-model"}]})")};
    return FakeUpstream::Reply{FakeUpstream::response(
        200, R"({"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}})")};
  };
}

std::string vllm_metrics(int waiting) {
  return "vllm:num_requests_waiting{model_name=\"m\"} " + std::to_string(waiting) +
         "\nvllm:num_requests_running{model_name=\"m\"} 1\n"
         "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n";
}

FakeTls tls_of(const TestPki& pki, bool also_plain = false) {
  return FakeTls{pki.server_cert(), pki.server_key(), also_plain};
}

// What sluice holds of `address`'s last scrape: its waiting count, or -1
// without one.
int scraped_waiting(const Process& sluice, const std::string& address) {
  HttpClient admin(kHost, sluice.admin_port());
  auto eps =
      nlohmann::json::parse(admin.request("GET", "/admin/v1/endpoints").body, nullptr, false);
  if (!eps.is_array()) return -1;
  for (const auto& e : eps)
    if (e["address"] == address && e["metrics"].is_object())
      return e["metrics"]["waiting"].get<int>();
  return -1;
}

double scrape_failures(const Process& sluice) {
  return scrape_metric(kHost, sluice.admin_port(), "sluice_metrics_scrape_failures_total");
}

std::vector<UpstreamRequest> model_polls(FakeUpstream& engine) {
  std::vector<UpstreamRequest> out;
  for (auto& r : engine.requests())
    if (r.head.rfind("GET /v1/models ", 0) == 0) out.push_back(r);
  return out;
}

std::vector<UpstreamRequest> completions(FakeUpstream& engine) {
  std::vector<UpstreamRequest> out;
  for (auto& r : engine.requests())
    if (r.head.rfind("POST /v1/completions ", 0) == 0) out.push_back(r);
  return out;
}

// An engine that speaks only HTTPS and wants its API key on /metrics (as
// vLLM behind an authenticating proxy): sluice scrapes it over one verified
// TLS connection kept alive, with the key, and serves requests through it.
TEST(UpstreamDataLayer, AnHttpsOnlyEngineWithAnApiKeyIsScrapedOverTls) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  FakeUpstream engine(answer_ok(), tls_of(pki));
  ASSERT_TRUE(engine.ok());
  engine.set_metrics(vllm_metrics(7));
  engine.require_metrics_authorization("Bearer engine-key");
  TempFile token("engine-key\n", "engine.token");
  TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + pki.ca() +
                                                   "}\n  upstreamCredentialFile: " + token.path() +
                                                   "\n"));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 7; }));
  // Keep-alive over TLS: several scrapes, one handshake.
  ASSERT_TRUE(eventually([&] { return engine.scrapes(true) >= 4; }));
  EXPECT_EQ(engine.tls_handshakes(), 1);
  EXPECT_EQ(engine.scrapes(false), 0);
  EXPECT_EQ(engine.scrapes_refused(), 0);
  EXPECT_EQ(scrape_failures(*sluice), 0.0);
  // The metrics follow the engine.
  engine.set_metrics(vllm_metrics(2));
  EXPECT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 2; }));
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(r.status, 200) << r.body;
  const auto served = completions(engine);
  ASSERT_EQ(served.size(), 1u);
  EXPECT_TRUE(served[0].tls);
  EXPECT_EQ(served[0].header("authorization"), "Bearer engine-key");
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(sluice->stderr_text().find("engine-key"), std::string::npos);
}

// Without the credential the engine answers 401: a failed scrape, counted,
// and no metrics.
TEST(UpstreamDataLayer, AScrapeRefusedForWantOfTheKeyIsACountedFailure) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  FakeUpstream engine(answer_ok(), tls_of(pki));
  ASSERT_TRUE(engine.ok());
  engine.set_metrics(vllm_metrics(7));
  engine.require_metrics_authorization("Bearer engine-key");
  TempFile cfg(make_config({engine.address()}, "  upstreamTls: {caFile: " + pki.ca() + "}\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(eventually([&] { return engine.scrapes_refused() >= 2; }));
  EXPECT_TRUE(eventually([&] { return scrape_failures(*sluice) >= 2; }));
  EXPECT_EQ(scraped_waiting(*sluice, engine.address()), -1);
}

// An endpoint whose certificate does not verify against its caFile: every
// scrape of it fails at the handshake (counted; nothing, the credential
// neither, reaches it), and the rest goes on: the other endpoint is scraped
// and serves every request.
TEST(UpstreamDataLayer, AScrapeWithAWrongCaFailsAndIsCountedAndNothingElseIsAffected) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  TempFile other_work("", "openssl.log");
  TestPki other(dir_of(other_work));  // another CA: it vouches for nothing here
  ASSERT_TRUE(other.ok()) << other.error();
  FakeUpstream https(answer_ok(), tls_of(pki));
  ASSERT_TRUE(https.ok());
  https.set_metrics(vllm_metrics(7));
  FakeUpstream plain(answer_ok());
  plain.set_metrics(vllm_metrics(3));
  TempFile token("engine-key\n", "engine.token");
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 1\n  upstreamCredentialFile: " +
               token.path() + "\nendpoints:\n  - address: " + https.address() +
               "\n    tls: {caFile: " + other.ca() + "}\n  - address: " + plain.address() + "\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(eventually([&] { return scraped_waiting(*sluice, plain.address()) == 3; }));
  ASSERT_TRUE(eventually([&] { return scrape_failures(*sluice) >= 3; }));
  EXPECT_EQ(scraped_waiting(*sluice, https.address()), -1);
  // The other endpoint's scrapes go on, its metrics fresh.
  plain.set_metrics(vllm_metrics(4));
  EXPECT_TRUE(eventually([&] { return scraped_waiting(*sluice, plain.address()) == 4; }));
  HttpClient c(kHost, sluice->port());
  for (int i = 0; i < 10; ++i) {
    auto r = c.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200) << r.error << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), plain.address());
  }
  EXPECT_EQ(https.tls_handshakes(), 0);
  EXPECT_TRUE(https.requests().empty());
  EXPECT_EQ(https.scrapes(true) + https.scrapes(false), 0);
  EXPECT_EQ(completions(plain).size(), 10u);
  HttpClient admin(kHost, sluice->admin_port());
  EXPECT_EQ(admin.request("GET", "/healthz").status, 200);
}

// The model catalogue's GET /v1/models polls (auth: on) go over TLS with
// the endpoint's credential too, and a tenant's GET /v1/models lists what
// the HTTPS engine serves.
TEST(UpstreamDataLayer, TheModelCatalogueIsPolledOverTlsWithTheCredential) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  FakeUpstream engine(answer_ok(), tls_of(pki));
  ASSERT_TRUE(engine.ok());
  TempFile token("engine-key\n", "engine.token");
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n  - address: " + engine.address() +
      "\n    credentialFile: " + token.path() + "\n    tls: {caFile: " + pki.ca() +
      ", serverName: localhost}\nauth:\n  apiKeys: {}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(eventually([&] { return !model_polls(engine).empty(); }));
  for (const auto& r : model_polls(engine)) {
    EXPECT_TRUE(r.tls);
    EXPECT_EQ(r.header("authorization"), "Bearer engine-key");
  }
}

// Issue 32's switch: a reload turns an endpoint's TLS on, then off again
// (the engine serves both on one port). Requests keep being served
// throughout, by a client that never stops; after each reload the
// requests and the scrapes both move: over TLS, then plain again, with the
// credential all along.
TEST(UpstreamDataLayer, AReloadSwitchesAnEndpointFromPlainToTlsAndBack) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  FakeUpstream engine(answer_ok(), tls_of(pki, /*also_plain=*/true));
  ASSERT_TRUE(engine.ok());
  engine.set_metrics(vllm_metrics(5));
  engine.require_metrics_authorization("Bearer engine-key");
  TempFile token("engine-key\n", "engine.token");
  auto config_with = [&](bool tls) {
    return "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  upstreamCredentialFile: " +
           token.path() + "\nendpoints:\n  - address: " + engine.address() + "\n" +
           (tls ? "    tls: {caFile: " + pki.ca() + "}\n" : "");
  };
  TempFile cfg(config_with(false));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 5; }));
  EXPECT_EQ(engine.scrapes(true), 0);

  // A client sending one request after another for the whole test.
  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, failed{0};
  std::string first_failure;
  std::thread client([&] {
    HttpClient c(kHost, sluice->port());
    while (!stop.load()) {
      auto r = c.post_json("/v1/completions", completion_body(1));
      if (r.status == 200) {
        ++served;
      } else if (failed++ == 0) {
        first_failure = std::to_string(r.status) + " " + r.error + " " + r.body;
      }
    }
  });
  // Requests and scrapes after the reload take `tls`'s way: a request
  // that came over it, and scrapes over it while the other way's count
  // stands still.
  auto moved_to = [&](bool tls) {
    const std::size_t before = completions(engine).size();
    EXPECT_TRUE(eventually([&] { return completions(engine).size() >= before + 3; }, 10000ms));
    EXPECT_EQ(completions(engine).back().tls, tls);
    EXPECT_EQ(completions(engine).back().header("authorization"), "Bearer engine-key");
    EXPECT_TRUE(eventually([&] { return engine.scrapes(tls) >= 2; }, 10000ms));
    const int other_way = engine.scrapes(!tls);
    const int this_way = engine.scrapes(tls);
    EXPECT_TRUE(eventually([&] { return engine.scrapes(tls) >= this_way + 3; }, 10000ms));
    EXPECT_EQ(engine.scrapes(!tls), other_way) << "scrapes still go the old way";
  };
  moved_to(false);
  HttpClient admin(kHost, sluice->admin_port());
  write_config(cfg.path(), config_with(true));
  auto r = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(r.status, 200) << r.body;
  {
    SCOPED_TRACE("plain to TLS");
    moved_to(true);
  }
  engine.set_metrics(vllm_metrics(6));
  EXPECT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 6; }));
  write_config(cfg.path(), config_with(false));
  r = admin.request("POST", "/admin/v1/reload");
  ASSERT_EQ(r.status, 200) << r.body;
  {
    SCOPED_TRACE("TLS to plain");
    moved_to(false);
  }
  engine.set_metrics(vllm_metrics(1));
  EXPECT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 1; }));
  stop = true;
  client.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(served.load(), 9);
  EXPECT_EQ(engine.scrapes_refused(), 0);
  EXPECT_EQ(scrape_failures(*sluice), 0.0);
  EXPECT_EQ(sluice->stop(), 0);
}

// The upstream TLS files are read with a bound: one over 1 MiB, or one that
// is not a regular file, is a config error naming it: at startup sluice
// does not start; on reload the reload fails and the running settings keep
// serving and scraping.
TEST(UpstreamDataLayer, AnOversizeOrIrregularTlsFileIsAConfigError) {
  TempFile work("", "openssl.log");
  TestPki pki(dir_of(work));
  ASSERT_TRUE(pki.ok()) << pki.error();
  TempFile big(std::string((1u << 20) + 1, 'A'), "big-ca.pem");
  {
    TempFile cfg(make_config({"127.0.0.1:9"}, "  upstreamTls: {caFile: " + big.path() + "}\n"));
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    auto p =
        Process::start({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"}, o);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->wait(20000ms), 2);
    EXPECT_NE(p->stderr_text().find(big.path() + ": larger than 1 MiB"), std::string::npos)
        << p->stderr_text();
  }
  FakeUpstream engine(answer_ok(), tls_of(pki));
  ASSERT_TRUE(engine.ok());
  engine.set_metrics(vllm_metrics(5));
  auto config_with = [&](const std::string& ca) {
    return make_config({engine.address()}, "  upstreamTls: {caFile: " + ca + "}\n");
  };
  TempFile cfg(config_with(pki.ca()));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(eventually([&] { return scraped_waiting(*sluice, engine.address()) == 5; }));
  HttpClient c(kHost, sluice->port());
  HttpClient admin(kHost, sluice->admin_port());
  for (const std::string& bad : {big.path(), std::string("/dev/zero")}) {
    SCOPED_TRACE(bad);
    write_config(cfg.path(), config_with(bad));
    auto r = admin.request("POST", "/admin/v1/reload");
    EXPECT_NE(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(bad + ": "), std::string::npos) << r.body;
    EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
    const int scrapes = engine.scrapes(true);
    EXPECT_TRUE(eventually([&] { return engine.scrapes(true) >= scrapes + 2; }));
  }
  EXPECT_EQ(scrape_failures(*sluice), 0.0);
}

}  // namespace
}  // namespace sluice::test
