// Hostile or broken files given to the binaries: each ends with a message
// naming the file, the line and what is wrong, or is skipped while sluice
// keeps serving; nothing hangs or reads without bound.
#include "harness.h"

namespace sluice::test {
namespace {

// Runs a binary that is expected to exit on its own; returns its exit code
// and what it wrote to stderr.
int run_to_exit(const std::vector<std::string>& argv, std::string* err) {
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start(argv, o);
  if (!p) return -1;
  const int rc = p->wait(20000ms);
  *err = p->stderr_text();
  return rc;
}

// A static endpoint that does not resolve stops sluice at startup with its
// entry named: the file, the entry's line and the host.
TEST(ConfigFiles, UnresolvableEndpointNamesFileLineAndHost) {
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n# the pool\nendpoints:\n"
      "  - address: 127.0.0.1:8000\n  - address: does-not-exist.invalid:8000\n"
      "    engine: vllm\n");
  std::string err;
  const int rc =
      run_to_exit({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"}, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "did not exit";
  EXPECT_NE(err.find(cfg.path() + ":7: endpoints[1].address: cannot resolve "
                                  "'does-not-exist.invalid'"),
            std::string::npos)
      << err;
}

// A repeated key is an error (exit 2) naming the second one, not a silently
// ignored section.
TEST(ConfigFiles, DuplicateKeyExitsTwo) {
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 1\nserver:\n  threads: 2\n");
  std::string err;
  EXPECT_EQ(run_to_exit({SLUICE_BIN, "--config", cfg.path()}, &err), 2);
  EXPECT_NE(err.find(cfg.path() + ":4: server: duplicate key (first at line 1)"), std::string::npos)
      << err;
}

// A config that never ends is refused once past the limit.
TEST(ConfigFiles, EndlessConfigExitsTwo) {
  std::string err;
  EXPECT_EQ(run_to_exit({SLUICE_BIN, "--config", "/dev/zero"}, &err), 2);
  EXPECT_NE(err.find("/dev/zero: larger than 4 MiB"), std::string::npos) << err;
}

// sluice-load's scenario files get the same check for repeated keys.
TEST(ConfigFiles, ScenarioDuplicateKeyExitsTwo) {
  TempFile scenario(
      "duration: 1s\nflows:\n  - name: a\n    arrival: {type: poisson, rate: 1}\n"
      "    arrival: {type: poisson, rate: 2}\n",
      "scenario.yaml");
  std::string err;
  EXPECT_EQ(
      run_to_exit(
          {SLUICE_LOAD_BIN, "--scenario", scenario.path(), "--target", "http://127.0.0.1:1"}, &err),
      2);
  EXPECT_NE(err.find(scenario.path() + ": flows[0].arrival (line 5): duplicate key (first at "
                                       "line 4)"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace sluice::test
