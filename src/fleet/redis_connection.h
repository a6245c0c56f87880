// A blocking Redis connection for one owner thread (the fleet's sync thread):
// every call is bounded by the configured timeout, so an unreachable, slow or
// restarted server costs that thread at most one timeout per call and never
// blocks anything else. Commands go out pipelined (one write, then every
// reply read). A write to a server that has gone raises SIGPIPE: the process
// must ignore it (sluice's main does; so do the tests). No hiredis type leaks out of this file's
// .cc, and nothing throws: failures are a false / nullopt and a message in error().
//
// Why blocking on its own thread rather than hiredis's async API driven from
// Asio: the sync loop is one batch per interval (write everything, read every
// reply), which a blocking pipeline does in two system calls; an async
// adapter would add a reactor integration for no concurrency the loop needs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sluice::fleet {

struct RedisAddress {
  std::string host = "127.0.0.1";  // used when unix_socket is empty
  std::uint16_t port = 6379;
  std::string unix_socket;  // a path: preferred when set
  std::string user;         // ACL user; empty: AUTH with the password alone
  std::string password;     // empty: no AUTH
  // Connect, and each write and read of a call; a call that exceeds it
  // drops the connection (the next call reconnects).
  std::chrono::milliseconds timeout{200};
};

// A reply copied out of hiredis.
struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  long long integer = 0;
  std::string str;  // kString, kStatus, kError
  std::vector<RedisReply> elements;

  bool is_error() const { return type == Type::kError; }
};

class RedisConnection {
 public:
  explicit RedisConnection(RedisAddress address);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Connects and authenticates unless already connected. False: error()
  // says why (unreachable, refused, timed out, the server's AUTH error, or
  // NOAUTH: the server wants a password this address has none of).
  bool ensure_connected();
  bool connected() const { return ctx_ != nullptr; }
  void disconnect();

  // Sends every command (each an argv: binary-safe) in one write, then
  // reads one reply per command. Connects first if needed. nullopt on a
  // connection failure or timeout (the connection is dropped: no reply of
  // this batch can be read as the next batch's). A command the server
  // refuses is a kError reply, not a failure.
  std::optional<std::vector<RedisReply>> pipeline(
      const std::vector<std::vector<std::string>>& commands);

  const std::string& error() const { return error_; }
  // Successful (re)connections so far: a reconnect shows as a step.
  std::uint64_t connects() const { return connects_; }

 private:
  struct Context;
  bool fail(std::string message);
  // pipeline() on a connected context.
  std::optional<std::vector<RedisReply>> exchange(
      const std::vector<std::vector<std::string>>& commands);

  RedisAddress address_;
  Context* ctx_ = nullptr;
  std::string error_;
  std::uint64_t connects_ = 0;
};

}  // namespace sluice::fleet
