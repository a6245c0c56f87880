// Command line and startup behaviour of sluice.
#include "harness.h"

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

}  // namespace
}  // namespace sluice::test
