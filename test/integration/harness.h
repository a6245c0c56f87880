// Shared helpers for integration tests: start sluice-mock and sluice on
// loopback port 0, write configs, wait for conditions with deadlines.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.h"
#include "support/process.h"

namespace sluice::test {

using namespace std::chrono_literals;

inline std::unique_ptr<Process> start_mock(std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {SLUICE_MOCK_BIN, "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string error;
  auto p = Process::start(argv, Process::Options{}, &error);
  EXPECT_TRUE(p) << error;
  return p;
}

// A config with the given endpoints and extra `server:` lines.
inline std::string make_config(const std::vector<std::string>& endpoints,
                               const std::string& server_extra = "") {
  std::string c = "server:\n  listen: 127.0.0.1:0\n  threads: 1\n" + server_extra;
  if (!endpoints.empty()) c += "endpoints:\n";
  for (const auto& e : endpoints) c += "  - address: " + e + "\n";
  return c;
}

inline std::unique_ptr<Process> start_sluice(const TempFile& config,
                                             std::vector<std::string> args = {},
                                             bool capture_stderr = false) {
  std::vector<std::string> argv = {SLUICE_BIN, "--config", config.path()};
  // Tests run in parallel: the admin plane on a free port too, unless the
  // test chooses one.
  if (std::find(args.begin(), args.end(), "--admin-listen") == args.end()) {
    argv.push_back("--admin-listen");
    argv.push_back("127.0.0.1:0");
  }
  argv.insert(argv.end(), args.begin(), args.end());
  std::string error;
  Process::Options options;
  options.capture_stderr = capture_stderr;
  auto p = Process::start(argv, options, &error);
  EXPECT_TRUE(p) << error;
  return p;
}

// Polls `condition` until it holds or `timeout` passes. For conditions that
// another process makes true; the timeout is the test's bound, not a guess
// at how long something takes.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = 5000ms) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

// Runs `cmd` with /bin/sh and returns its exit code (-1 if it did not
// exit). posix_spawn, not fork(): nothing runs in the child before exec (a
// fork of this multi-threaded, sanitized process could inherit a held lock).
inline int run_shell(const std::string& cmd) {
  pid_t pid = -1;
  const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) !=
      0)
    return -1;
  int status = -1;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct CtlResult {
  int rc = -1;
  std::string out, err;
};

// Runs sluice-ctl with `args` (shell words, already quoted as needed) and
// `env` (VAR=value words) and returns its exit code, stdout and stderr.
inline CtlResult ctl(const std::string& args, const std::string& env = "") {
  TempFile out("", "ctl.out");
  TempFile err("", "ctl.err");
  const std::string cmd =
      env + " exec " SLUICE_CTL_BIN " " + args + " > " + out.path() + " 2> " + err.path();
  // Not std::system(): it changes the whole process's SIGINT/SIGQUIT
  // dispositions while the load threads run.
  CtlResult r;
  r.rc = run_shell(cmd);
  std::ifstream o(out.path()), e(err.path());
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

// A loopback port with nothing listening on it: connections to it are
// refused. The socket stays bound (never listening) while the object lives,
// so no other bind (a mock, sluice, an ephemeral client port) can take the
// port and bring the "dead" address to life; keep it alive as long as the
// address is in use.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0) << "socket: " << errno;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "bind: " << errno;
    socklen_t len = sizeof a;
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    EXPECT_NE(port_, 0);
  }
  ~ClosedPort() {
    if (fd_ >= 0) close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  std::uint16_t port() const { return port_; }
  // "127.0.0.1:PORT"
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

inline std::string completion_body(int max_tokens, bool stream = false,
                                   const std::string& prompt = "Say something about fairness.") {
  return std::string(R"({"model":"mock-model","prompt":")") + prompt + R"(","max_tokens":)" +
         std::to_string(max_tokens) + (stream ? R"(,"stream":true})" : "}");
}

}  // namespace sluice::test
