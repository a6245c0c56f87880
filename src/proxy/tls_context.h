// The TLS side of the client listener (server.tls): the OpenSSL server
// context built from the config's files and settings, and the slot that
// holds the one new connections get.
//
// A context is immutable once built. Each TLS connection holds the one it
// started with (a shared_ptr), so installing a new one (a reload, or its
// files changed on disk) changes only what the next connections get:
// connections and streams in progress keep theirs until they end.
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "config/config.h"

namespace sluice::proxy {

// What tells that a file changed without reading it: its device, inode,
// size and modification time (a file replaced by a rename is a new inode;
// one rewritten in place has a new mtime or size). `exists` false: it could
// not be looked at.
struct FileStamp {
  bool exists = false;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const std::string& path);

// The files a context is built from: certificate chain, key, client CAs
// (the last one unused without clientCaFile).
using TlsFileStamps = std::array<FileStamp, 3>;
TlsFileStamps stamps_of(const config::TlsOptions& o);

class TlsServerContext {
 public:
  TlsServerContext();
  boost::asio::ssl::context& ssl() { return ssl_; }
  // The leaf certificate, for the log and /metrics: its subject, its serial
  // number (hex) and the end of its validity (Unix seconds).
  const std::string& subject() const { return subject_; }
  const std::string& serial() const { return serial_; }
  std::int64_t not_after() const { return not_after_; }
  // The files as they were looked at just before they were read.
  const TlsFileStamps& stamps() const { return stamps_; }

 private:
  friend std::shared_ptr<TlsServerContext> build_tls_context(const config::TlsOptions& o,
                                                             std::string& error);
  boost::asio::ssl::context ssl_;
  std::string subject_;
  std::string serial_;
  std::int64_t not_after_ = 0;
  TlsFileStamps stamps_{};
};

// Reads the files `o` names (each a regular file of at most 1 MiB) and
// builds a server context: the certificate chain and its key (which must
// match), the minimum version (never below TLS 1.2), the ciphers, ALPN
// (http/1.1 when the client offers it, else none) and, with clientCaFile,
// client-certificate verification. Null with `error` naming the field, the
// file and what is wrong. Never throws; any thread (not an I/O thread: it
// reads files).
std::shared_ptr<TlsServerContext> build_tls_context(const config::TlsOptions& o,
                                                    std::string& error);

// The name of the client certificate `ssl`'s handshake verified: its first
// URI subject alternative name, else its first DNS name, else its first
// email address, else its subject's common name. Empty without a verified
// certificate, or when the name is empty, longer than 1 KiB or holds
// control bytes (an embedded NUL could make it read as another name).
std::string verified_peer_name(SSL* ssl);

// The context new TLS connections get: built at startup, replaced by a
// reload (SIGHUP, POST /admin/v1/reload) and when its files change on disk.
// Any thread.
class TlsCredentials {
 public:
  // Builds the first context; throws config::ConfigError naming the file.
  explicit TlsCredentials(const config::TlsOptions& o);

  // What a new connection starts with.
  std::shared_ptr<TlsServerContext> current() const;
  // A reload: `context`, built from `o` before the reload applied anything,
  // is what new connections get from now on, and `o` what the file check
  // builds from.
  void install(std::shared_ptr<TlsServerContext> context, const config::TlsOptions& o);

  // The periodic check (server.tls.reloadCheckInterval): if a file changed
  // since the last build or attempt, builds again. A set that fails (a
  // certificate written before its key, a bad file) keeps the running
  // context and is tried again when a file changes again. `message` says
  // what was loaded, or why not.
  enum class Check { kUnchanged, kReloaded, kFailed };
  Check check_files(std::string& message);

  // For /metrics: contexts installed after the first, and builds that
  // failed (reloads and file checks).
  std::uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  void note_failure() { failures_.fetch_add(1, std::memory_order_relaxed); }

 private:
  mutable std::mutex current_mu_;  // current_ only: held for a pointer copy
  std::shared_ptr<TlsServerContext> current_;
  std::mutex build_mu_;  // one build-and-install at a time; guards the two below
  config::TlsOptions options_;
  TlsFileStamps attempted_{};  // the files as the last build (or attempt) saw them
  std::atomic<std::uint64_t> reloads_{0};
  std::atomic<std::uint64_t> failures_{0};
};

// A line for the log: what a context holds.
std::string describe(const TlsServerContext& c);

}  // namespace sluice::proxy
