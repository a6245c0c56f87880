// Command line and startup behaviour of sluice, and of sluice-ctl against
// an admin address that answers what it should not.
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

}  // namespace
}  // namespace sluice::test
