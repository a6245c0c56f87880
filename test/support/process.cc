#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::unique_ptr<Process> Process::start(const std::vector<std::string>& argv,
                                        const Options& options, std::string* error) {
  int out_pipe[2];
  int err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return nullptr;
  if (options.capture_stderr && pipe2(err_pipe, O_CLOEXEC) != 0) return nullptr;
  // Built before fork: the child of a multi-threaded process only execs.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    // If the test dies (a failed assertion under ASan aborts it), its
    // servers die with it instead of holding ctest's output pipe open.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out_pipe[1], STDOUT_FILENO);
    if (options.capture_stderr) dup2(err_pipe[1], STDERR_FILENO);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s failed: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  std::unique_ptr<Process> p(new Process());
  p->pid_ = pid;
  p->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  close(out_pipe[1]);
  p->stdout_fd_ = out_pipe[0];
  if (options.capture_stderr) {
    close(err_pipe[1]);
    p->stderr_fd_ = err_pipe[0];
    fcntl(p->stderr_fd_, F_SETFL, O_NONBLOCK);
  }
  if (!options.wait_for_listen) return p;

  auto deadline = Clock::now() + options.startup_timeout;
  std::string out;
  while (true) {
    auto pos = out.find("listening on ");
    auto eol = pos == std::string::npos ? std::string::npos : out.find('\n', pos);
    if (eol != std::string::npos) {
      p->address_ = out.substr(pos + 13, eol - pos - 13);
      p->port_ = static_cast<std::uint16_t>(
          std::atoi(p->address_.substr(p->address_.rfind(':') + 1).c_str()));
      // The other lines of the same write: "<what> listening on HOST:PORT".
      auto port_of = [&out](const std::string& what) -> std::uint16_t {
        auto pos = out.find(what + " listening on ");
        auto eol = pos == std::string::npos ? std::string::npos : out.find('\n', pos);
        if (eol == std::string::npos) return 0;
        const std::string a = out.substr(pos, eol - pos);
        return static_cast<std::uint16_t>(std::atoi(a.substr(a.rfind(':') + 1).c_str()));
      };
      p->admin_port_ = port_of("admin");
      p->tls_port_ = port_of("tls");
      return p;
    }
    pollfd pfd{p->stdout_fd_, POLLIN, 0};
    int ms = remaining_ms(deadline);
    if (ms == 0 || poll(&pfd, 1, ms) <= 0) {
      if (error) *error = "timed out waiting for 'listening on' from " + argv[0];
      p->stop(SIGKILL);
      return nullptr;
    }
    char buf[512];
    ssize_t n = read(p->stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      if (error)
        *error = argv[0] + " exited before listening (status " +
                 std::to_string(p->wait(std::chrono::milliseconds(5000))) + ")";
      return nullptr;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

Process::~Process() {
  if (!exited_) stop(SIGKILL);
  if (pidfd_ >= 0) close(pidfd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

void Process::drain_stderr() {
  if (stderr_fd_ < 0) return;
  char buf[4096];
  while (true) {
    ssize_t n = read(stderr_fd_, buf, sizeof buf);
    if (n <= 0) break;
    stderr_.append(buf, static_cast<std::size_t>(n));
  }
}

bool Process::running() {
  if (exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    status_ = decode_status(status);
    return false;
  }
  return true;
}

int Process::wait(std::chrono::milliseconds timeout) {
  if (exited_) return status_;
  auto deadline = Clock::now() + timeout;
  while (true) {
    drain_stderr();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = decode_status(status);
      drain_stderr();
      return status_;
    }
    int ms = remaining_ms(deadline);
    if (ms == 0) return -1;
    // The pidfd becomes readable when the process exits; stderr output also
    // wakes us so that a chatty child never blocks on a full pipe.
    pollfd pfds[2] = {{pidfd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}};
    poll(pfds, stderr_fd_ >= 0 ? 2 : 1, ms);
  }
}

int Process::stop(int sig, std::chrono::milliseconds timeout) {
  if (exited_) return status_;
  kill(pid_, sig);
  int rc = wait(timeout);
  if (rc == -1) {
    kill(pid_, SIGKILL);
    wait(std::chrono::milliseconds(10000));
    return -1;
  }
  return rc;
}

TempFile::TempFile(const std::string& contents, const std::string& name) {
  char tmpl[] = "/tmp/sluice-test-XXXXXX";
  dir_ = mkdtemp(tmpl);
  path_ = dir_ + "/" + name;
  std::ofstream(path_) << contents;
}

bool TempFile::replace(const std::string& contents) const {
  const std::string tmp = path_ + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << contents;
  }
  return std::rename(tmp.c_str(), path_.c_str()) == 0;
}

TempFile::~TempFile() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace sluice::test
