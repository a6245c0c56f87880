// Command line and startup behaviour of sluice, of sluice-ctl against an
// admin address that answers what it should not, and of sluice-ctl's key
// commands against a real sluice.
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

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

// The words of a table's line, for comparing rows whatever the widths.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The line of `table` that starts with `head`, as words; empty when none.
std::vector<std::string> row_of(const std::string& table, const std::string& head) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(head, 0) == 0) return words(line);
  return {};
}

// Issue 41, item 6: a tenant's quotas as sluice-ctl shows them (a table and
// --json), and reset. The numbers in the table are the answer's.
TEST(Cli, SluiceCtlShowsAndResetsQuotas) {
  auto mock = start_mock();
  ASSERT_TRUE(mock);
  TempFile keys("", "keys.yaml");
  TempFile cfg(make_config({mock->address()}) + "auth:\n  apiKeys: {file: " + keys.path() + "}\n" +
               "tenants:\n  - id: acme\n    quotas:\n"
               "      - {name: tpm, tokens: 100k, window: 1m}\n"
               "      - {name: daily, requests: 1000, calendar: day, mode: shadow}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  const std::string admin = "--admin 127.0.0.1:" + std::to_string(sluice->admin_port()) + " ";
  auto r = ctl(admin + "key create --tenant acme");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.size() - 1);
  for (int i = 0; i < 3; ++i) {
    HttpClient c("127.0.0.1", sluice->port());
    auto served =
        c.post_json("/v1/completions", completion_body(2), {{"Authorization", "Bearer " + key}});
    ASSERT_EQ(served.status, 200) << served.body;
  }
  // --json: the answer itself, once the three requests have settled.
  nlohmann::json rows;
  ASSERT_TRUE(eventually([&] {
    r = ctl(admin + "--json quotas --tenant acme");
    rows = nlohmann::json::parse(r.out, nullptr, false);
    return r.rc == 0 && rows.is_array() && rows.size() == 2 && rows[0]["reserved"] == 0 &&
           rows[1]["reserved"] == 0;
  })) << r.rc
      << " " << r.out << r.err;
  const auto& tpm = rows[0]["name"] == "tpm" ? rows[0] : rows[1];
  const auto& daily = rows[0]["name"] == "tpm" ? rows[1] : rows[0];
  EXPECT_EQ(tpm["tenant"], "acme");
  EXPECT_EQ(tpm["windowMs"], 60000);
  EXPECT_GT(tpm["used"].get<std::uint64_t>(), 3u);
  EXPECT_EQ(daily["calendar"], "day");
  EXPECT_EQ(daily["used"], 3);
  EXPECT_EQ(daily["mode"], "shadow");

  r = ctl(admin + "quotas");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(words(r.out.substr(0, r.out.find('\n'))),
            words("OWNER NAME MEASURE PERIOD LIMIT USED RESERVED REMAINING RESETS-IN MODE "
                  "REFUSED"))
      << r.out;
  auto row = row_of(r.out, "tenant:acme  tpm");
  ASSERT_EQ(row.size(), 11u) << r.out;
  const std::string used = std::to_string(tpm["used"].get<std::uint64_t>());
  const std::string left = std::to_string(100000 - tpm["used"].get<std::uint64_t>());
  EXPECT_EQ(
      std::vector<std::string>(row.begin(), row.begin() + 8),
      (std::vector<std::string>{"tenant:acme", "tpm", "tokens", "1m0s", "100000", used, "0", left}))
      << r.out;
  // About a minute (the window, from the last bucket), as Go prints it:
  // "59.5s", "1m0.425s".
  EXPECT_TRUE(std::regex_match(row[8], std::regex("(1m|2m)?[0-9]+(\\.[0-9]+)?s"))) << row[8];
  EXPECT_EQ(row[9], "enforce");
  EXPECT_EQ(row[10], "0");
  row = row_of(r.out, "tenant:acme  daily");
  ASSERT_EQ(row.size(), 12u) << r.out;  // REFUSED of a shadow limit: "would N"
  EXPECT_EQ(std::vector<std::string>(row.begin(), row.begin() + 8),
            (std::vector<std::string>{"tenant:acme", "daily", "requests", "day", "1000", "3", "0",
                                      "997"}))
      << r.out;
  EXPECT_EQ(std::vector<std::string>(row.begin() + 9, row.end()),
            (std::vector<std::string>{"shadow", "would", "0"}))
      << r.out;

  // A reset: both windows count nothing from there.
  r = ctl(admin + "quota reset acme");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "quota acme: reset; its windows count from now (what is in flight stays held)\n");
  r = ctl(admin + "--json quotas --tenant acme");
  ASSERT_EQ(r.rc, 0) << r.err;
  rows = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(rows.is_array() && rows.size() == 2) << r.out;
  EXPECT_EQ(rows[0]["used"], 0) << r.out;
  EXPECT_EQ(rows[1]["used"], 0) << r.out;
  r = ctl(admin + "quota reset nobody");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "sluice-ctl: 404 no-quota: tenant 'nobody' has no quota\n");
  r = ctl(admin + "quotas --tenant " + std::string(300, 'x'));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("400 invalid-tenant"), std::string::npos) << r.err;
  EXPECT_EQ(ctl(admin + "quota reset").rc, 2);
  EXPECT_EQ(ctl(admin + "quota clear acme").rc, 2);
  EXPECT_EQ(ctl(admin + "quotas acme").rc, 2);
  EXPECT_EQ(sluice->stop(), 0);
}

// Issue 41, item 6: key create --quota SPEC, repeatable, is the body's
// "quotas" in the config's field names; a malformed SPEC is a usage error
// (exit 2) naming what is wrong, and nothing is sent. The admin address is
// a loopback server that records what it is sent.
TEST(Cli, SluiceCtlKeyCreateSendsQuotaSpecs) {
  FakeUpstream admin([](const UpstreamRequest&) {
    FakeUpstream::Reply r;
    r.bytes = FakeUpstream::response(
        201, R"({"id":"key_1","tenant":"acme","prefix":"sk-sluice-abcd","key":"sk-sluice-x"})");
    r.close_after = true;
    return r;
  });
  const std::string at = "--admin " + admin.address() + " ";
  auto r = ctl(at +
               "key create --tenant acme --quota tokens=20k/1m --quota "
               "'cost=0.25/month,name=spend,shadow,models=m1|fam/*' --quota requests=100/1s "
               "--quota tokens=20M/day --quota inputTokens=1.5Ki/1h30m");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "sk-sluice-x\n");
  auto sent = admin.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].head.rfind("POST /admin/v1/keys ", 0), 0u) << sent[0].head;
  const auto body = nlohmann::json::parse(sent[0].body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << sent[0].body;
  EXPECT_EQ(body["tenant"], "acme");
  EXPECT_EQ(body["quotas"], nlohmann::json::parse(R"([
      {"name":"tokens-1m","tokens":"20k","window":"1m"},
      {"name":"spend","cost":"0.25","calendar":"month","mode":"shadow","models":["m1","fam/*"]},
      {"name":"requests-1s","requests":"100","window":"1s"},
      {"name":"tokens-day","tokens":"20M","calendar":"day"},
      {"name":"inputTokens-1h30m","inputTokens":"1.5Ki","window":"1h30m"}])"))
      << sent[0].body;

  const std::pair<std::string, std::string> bad[] = {
      {"tokens=20k", "expected MEASURE=AMOUNT/PERIOD"},
      {"tokens=x/1m", "the amount 'x' is not a number"},
      {"tokens=20k/week", "the period 'week' is not day, month or a duration"},
      {"tokenz=20k/1m", "unknown measure 'tokenz'"},
      {"tokens=/1m", "the amount '' is not a number"},
      {"cost=5Ki/day", "the amount '5Ki' is not a number"},
      {"requests=100/1m,burst", "unexpected 'burst'"},
      {"requests=100/1m,name=", "unexpected 'name='"},
      {"tokens=20k/m1", "the period 'm1' is not"},
  };
  for (const auto& [spec, what] : bad) {
    SCOPED_TRACE(spec);
    r = ctl(at + "key create --tenant acme --quota '" + spec + "'");
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("sluice-ctl: --quota '" + spec + "': " + what, 0), 0u) << r.err;
  }
  EXPECT_EQ(ctl(at + "key create --tenant acme --quota").rc, 2);
  // Nothing more was sent.
  EXPECT_EQ(admin.requests().size(), 1u);
}

}  // namespace
}  // namespace sluice::test
