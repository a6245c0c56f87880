// Command line and startup behaviour of sluice, of sluice-ctl against an
// admin address that answers what it should not, and of sluice-ctl's key
// commands against a real sluice.
#include <nlohmann/json.hpp>

#include "harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

int run_sluice(const std::vector<std::string>& args, std::string* err) {
  std::vector<std::string> argv = {SLUICE_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start(argv, o);
  int rc = p->wait(20000ms);
  *err = p->stderr_text();
  return rc;
}

TEST(Cli, InvalidConfigExitsTwoNamingFieldAndLine) {
  TempFile bad("server:\n  listen: 127.0.0.1:0\n  maxBodyBytes: lots\n");
  std::string err;
  EXPECT_EQ(run_sluice({"--config", bad.path()}, &err), 2);
  EXPECT_NE(err.find("config.yaml:3: server.maxBodyBytes: expected a size"), std::string::npos)
      << err;

  TempFile unknown("endpoints:\n  - address: 127.0.0.1:1\n    enigne: vllm\n");
  EXPECT_EQ(run_sluice({"--config", unknown.path()}, &err), 2);
  EXPECT_NE(err.find("config.yaml:3: endpoints[0].enigne: unknown field"), std::string::npos)
      << err;
}

TEST(Cli, UsageErrorsExitTwo) {
  std::string err;
  EXPECT_EQ(run_sluice({}, &err), 2);
  EXPECT_NE(err.find("--config is required"), std::string::npos) << err;
  TempFile ok("");
  EXPECT_EQ(run_sluice({"--config", ok.path(), "--threads", "zero"}, &err), 2);
  EXPECT_EQ(run_sluice({"--config", ok.path(), "--bogus"}, &err), 2);
  EXPECT_EQ(run_sluice({"--config", "/nonexistent.yaml"}, &err), 2);
}

TEST(Cli, PortZeroPrintsTheBoundAddress) {
  TempFile cfg("server:\n  listen: 127.0.0.1:8\n");  // overridden by --listen
  auto p = start_sluice(cfg, {"--listen", "127.0.0.1:0", "--threads", "2"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->address().rfind("127.0.0.1:", 0), 0u);
  EXPECT_NE(p->port(), 0);
  EXPECT_EQ(p->stop(SIGINT), 0);
}

// The real sluice-ctl against a loopback server that answers every request
// 200 with valid JSON of another shape ([]): exit 4 and a line naming what
// came back. It used to die of an uncaught nlohmann::type_error (SIGABRT,
// exit 134) with nothing said about the answer (issue 33).
TEST(Cli, SluiceCtlNamesAnAnswerOfAnotherShape) {
  FakeUpstream admin([](const UpstreamRequest&) {
    FakeUpstream::Reply r;
    r.bytes = FakeUpstream::response(200, "[]");
    r.close_after = true;  // sluice-ctl reads to the end of the connection
    return r;
  });
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const Case cases[] = {
      {{"drain", "status"}, "sluice-ctl: drain status: expected a JSON object, got an array: []\n"},
      {{"flow", "tenant-a"},
       "sluice-ctl: flow tenant-a: expected a JSON object, got an array: []\n"},
      {{"flow", "set", "tenant-a", "--weight", "2"},
       "sluice-ctl: flow set tenant-a: expected a JSON object, got an array: []\n"},
      {{"reload"}, "sluice-ctl: reload: expected a JSON object, got an array: []\n"},
      {{"drain", "--wait", "--timeout", "5"},
       "sluice-ctl: drain: expected a JSON object, got an array: []\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {SLUICE_CTL_BIN, "--admin", admin.address()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(c.args[0] + (c.args.size() > 1 ? " " + c.args[1] : ""));
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    auto p = Process::start(argv, o);
    ASSERT_TRUE(p);
    // Each run is one request and one answer; 10 s is far beyond it, and a
    // hang fails here (wait kills it) rather than at ctest's timeout.
    EXPECT_EQ(p->wait(10000ms), 4);
    EXPECT_EQ(p->stderr_text(), c.err);
  }
  // One request per run: drain --wait stopped at the first answer.
  EXPECT_EQ(admin.requests().size(), std::size(cases));
}

// Issue 32: API keys made and managed with sluice-ctl. The key is on
// stdout alone (KEY=$(sluice-ctl key create ...) holds exactly it), works
// at once, and afterwards only its id and prefix are ever printed;
// disable, enable and revoke apply to the next request.
TEST(Cli, SluiceCtlManagesApiKeys) {
  auto mock = start_mock();
  ASSERT_TRUE(mock);
  TempFile keys("", "keys.yaml");
  TempFile cfg(make_config({mock->address()}) + "auth:\n  apiKeys: {file: " + keys.path() + "}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  const std::string admin = "--admin 127.0.0.1:" + std::to_string(sluice->admin_port()) + " ";
  auto complete = [&](const std::string& key) {
    HttpClient c("127.0.0.1", sluice->port());
    return c.post_json("/v1/completions", completion_body(2), {{"Authorization", "Bearer " + key}});
  };

  auto r = ctl(admin + "key create --tenant acme");
  ASSERT_EQ(r.rc, 0) << r.err;
  // stdout: the key and one newline, nothing else.
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  const std::string key = r.out.substr(0, r.out.size() - 1);
  EXPECT_EQ(key.rfind("sk-sluice-", 0), 0u) << key;
  EXPECT_EQ(key.size(), 10u + 43u) << key;
  EXPECT_EQ(key.find_first_of(" \t\r"), std::string::npos) << key;
  // stderr: which key it is, and that it is not shown again.
  const std::string head = "sluice-ctl: key ";
  const std::string tail =
      " for tenant acme (" + key.substr(0, 14) + "...): store it now, it is not shown again\n";
  ASSERT_EQ(r.err.rfind(head, 0), 0u) << r.err;
  ASSERT_GT(r.err.size(), head.size() + tail.size()) << r.err;
  ASSERT_EQ(r.err.substr(r.err.size() - tail.size()), tail) << r.err;
  const std::string id = r.err.substr(head.size(), r.err.size() - head.size() - tail.size());
  EXPECT_EQ(id.rfind("key_", 0), 0u) << id;

  auto served = complete(key);
  EXPECT_EQ(served.status, 200) << served.body;

  // The list and the record: id, tenant, prefix, state; never the key.
  r = ctl(admin + "keys");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ID ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(id + "  acme    " + key.substr(0, 14) + "  -        enabled"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find(key.substr(14)), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  r = ctl(admin + "--json keys");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto list = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(list.is_array()) << r.out;
  ASSERT_EQ(list.size(), 1u) << r.out;
  EXPECT_EQ(list[0]["id"], id);
  EXPECT_EQ(list[0]["tenant"], "acme");
  EXPECT_FALSE(list[0].contains("key")) << r.out;
  EXPECT_EQ(r.out.find(key.substr(14)), std::string::npos) << r.out;
  r = ctl(admin + "key " + id);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\n" + id + "  acme"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(key.substr(14)), std::string::npos) << r.out;

  // Disabled: refused with its reason at the next request; enabled again: served.
  r = ctl(admin + "key disable " + id);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "key " + id + ": disabled\n");
  auto refused = complete(key);
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.header("x-gateway-inference-dropped-reason"), "key-disabled");
  r = ctl(admin + "keys");
  EXPECT_NE(r.out.find("disabled"), std::string::npos) << r.out;
  r = ctl(admin + "key enable " + id);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "key " + id + ": enabled\n");
  served = complete(key);
  EXPECT_EQ(served.status, 200) << served.body;

  // Revoked: unknown at the next request; revoking again is refused.
  r = ctl(admin + "key revoke " + id);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "key " + id + ": revoked\n");
  refused = complete(key);
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.header("x-gateway-inference-dropped-reason"), "unknown-key");
  r = ctl(admin + "key revoke " + id);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("sluice-ctl: 404 unknown-key: no key '" + id + "'", 0), 0u) << r.err;
  r = ctl(admin + "key " + id);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("404 unknown-key"), std::string::npos) << r.err;

  // An id and an expiry of one's own, RFC 3339 or unix seconds; the server's
  // refusals and the command line's mistakes.
  r = ctl(admin + "key create --tenant beta --id ops-1 --expires 2099-01-01T00:00:00Z");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.rfind("sluice-ctl: key ops-1 for tenant beta (sk-sluice-", 0), 0u) << r.err;
  EXPECT_EQ(complete(r.out.substr(0, r.out.size() - 1)).status, 200);
  r = ctl(admin + "--json key create --tenant beta --id ops-2 --expires 4102444800");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto made = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(made.is_object()) << r.out;
  EXPECT_EQ(made["expires"], "2100-01-01T00:00:00Z");
  EXPECT_EQ(complete(made["key"].get<std::string>()).status, 200);
  // A scoped key: the scope reaches the record.
  r = ctl(admin +
          "--json key create --tenant beta --id ops-3 --models m1,fam/* --max-objective batch "
          "--max-tokens 64");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto scoped = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(scoped.is_object()) << r.out;
  EXPECT_EQ(scoped["models"], nlohmann::json::array({"m1", "fam/*"}));
  EXPECT_EQ(scoped["maxObjective"], "batch");
  EXPECT_EQ(scoped["maxTokens"], 64);
  EXPECT_EQ(ctl(admin + "key create --tenant beta --max-tokens lots").rc, 2);
  r = ctl(admin + "key create --tenant beta --models 'a*b'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("400 invalid-scope"), std::string::npos) << r.err;
  r = ctl(admin + "keys");
  EXPECT_NE(r.out.find("\nops-1  beta    sk-sluice-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  2099-01-01T00:00:00Z  enabled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  2100-01-01T00:00:00Z  enabled"), std::string::npos) << r.out;
  r = ctl(admin + "key create --tenant beta --id ops-1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("409 key-exists"), std::string::npos) << r.err;
  r = ctl(admin + "key create --tenant beta --expires soon");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("400 invalid-expires"), std::string::npos) << r.err;
  r = ctl(admin + "key create --tenant a/b");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("400 invalid-tenant"), std::string::npos) << r.err;
  EXPECT_EQ(ctl(admin + "key create").rc, 2);
  EXPECT_EQ(ctl(admin + "key create --tenant acme --weight 2").rc, 2);
  EXPECT_EQ(ctl(admin + "key disable").rc, 2);
  EXPECT_EQ(ctl(admin + "key revoke 'a/../b'").rc, 2);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
