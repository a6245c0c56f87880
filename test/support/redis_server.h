// A real redis-server for tests (Debian's, started on a unix socket in a
// fresh directory, nothing on TCP, nothing persisted), and a temporary
// directory that is removed with its object.
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fleet/redis_connection.h"
#include "support/process.h"

namespace sluice::test {

inline const char* redis_server_bin() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
    if (access(p, X_OK) == 0) return p;
  return nullptr;
}

// Where redis-server comes from, for a test that needs it (support/requires.h).
inline constexpr const char* kRedisPackage =
    "Debian package redis-server; scripts/install-deps.sh installs it";

// A fresh directory, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/sluice-redis-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// redis-server on `socket`, nothing on TCP, nothing persisted (but the
// append-only file, with `appendonly`: a restart in the same directory
// reads it back).
class RedisServer {
 public:
  RedisServer(std::string dir, std::string password = "", bool appendonly = false)
      : dir_(std::move(dir)), password_(std::move(password)), appendonly_(appendonly) {}
  std::string socket() const { return dir_ + "/redis.sock"; }

  // Starts it and waits (bounded) until it answers PING.
  bool start() {
    std::vector<std::string> argv = {redis_server_bin(),
                                     "--port",
                                     "0",
                                     "--unixsocket",
                                     socket(),
                                     "--unixsocketperm",
                                     "700",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     appendonly_ ? "yes" : "no",
                                     "--appendfsync",
                                     "always",
                                     "--loglevel",
                                     "warning"};
    if (!password_.empty()) {
      argv.push_back("--requirepass");
      argv.push_back(password_);
    }
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    process_ = Process::start(argv, o);
    if (!process_) return false;
    fleet::RedisAddress a;
    a.unix_socket = socket();
    a.password = password_;
    fleet::RedisConnection probe(a);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = probe.pipeline({{"PING"}});
      if (r && (*r)[0].str == "PONG") return true;
      if (!process_->running()) return false;
      poll(nullptr, 0, 10);  // the server is still starting: try again shortly
    }
    return false;
  }
  void kill() {
    if (process_) process_->stop(SIGKILL);
    process_.reset();
  }
  ~RedisServer() {
    if (process_) process_->stop(SIGTERM);
  }

 private:
  std::string dir_;
  std::string password_;
  bool appendonly_ = false;
  std::unique_ptr<Process> process_;
};

}  // namespace sluice::test
