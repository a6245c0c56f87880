// Starts a real binary for an integration test, finds the address it prints
// ("listening on HOST:PORT"), and stops it, reporting how it exited. Waiting
// uses pidfd + poll with deadlines: no sleeps.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace sluice::test {

class Process {
 public:
  struct Options {
    bool wait_for_listen = true;
    bool capture_stderr = false;  // otherwise inherited (sanitizer reports stay visible)
    std::chrono::milliseconds startup_timeout{20000};
  };

  // Returns null (and a message in `error`) if the process cannot start or
  // never prints its address.
  static std::unique_ptr<Process> start(const std::vector<std::string>& argv,
                                        const Options& options, std::string* error = nullptr);
  static std::unique_ptr<Process> start(const std::vector<std::string>& argv) {
    return start(argv, Options{});
  }
  ~Process();

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  std::uint16_t port() const { return port_; }
  // sluice's "admin listening on HOST:PORT" (printed in the same write as
  // the first line); 0 if the process printed none.
  std::uint16_t admin_port() const { return admin_port_; }
  // sluice's "tls listening on HOST:PORT" (same write); 0 without one.
  std::uint16_t tls_port() const { return tls_port_; }
  pid_t pid() const { return pid_; }

  // Sends `sig` and waits for exit. Returns the exit code, 128+signal if it was
  // killed by a signal, or -1 if it did not exit within `timeout` (then it is
  // killed with SIGKILL).
  int stop(int sig = 15, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));
  // Waits for the process to exit on its own; same return values as stop().
  int wait(std::chrono::milliseconds timeout);
  bool running();
  // The captured stderr (capture_stderr only), read after exit.
  const std::string& stderr_text() const { return stderr_; }
  // The captured stderr so far, while it runs (capture_stderr only).
  const std::string& stderr_now() {
    drain_stderr();
    return stderr_;
  }

 private:
  Process() = default;
  void drain_stderr();

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string address_;
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;
  std::uint16_t tls_port_ = 0;
  std::string stderr_;
};

// A file under a fresh temporary directory, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& contents, const std::string& name = "config.yaml");
  ~TempFile();
  const std::string& path() const { return path_; }
  // New contents, written whole to a new name and renamed over the file: a
  // reader (a reload, a file watch) never sees half of it. False if the
  // rename failed.
  bool replace(const std::string& contents) const;

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace sluice::test
