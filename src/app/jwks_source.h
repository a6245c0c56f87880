// Where the JWKS comes from (auth.jwt): a file, watched; or a URL, fetched
// in the background every jwksRefreshInterval. Either way a JWT naming a
// key it lacks asks for it again, at most once per jwksMinRefetchInterval:
// a flood of unknown `kid`s is one fetch per interval, never one each.
// Runs on the data layer's thread; hands each JWKS that parses to
// `on_keys` (a document that does not parse keeps the keys in use).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "auth/jwks.h"
#include "config/config.h"
#include "datalayer/endpoints_watcher.h"

namespace sluice::app {

class JwksSource {
 public:
  using OnKeys = std::function<void(std::shared_ptr<const auth::Jwks>)>;
  // `taken`: called on the data layer's thread each time a refetch request
  // is taken (the data plane may ask again from then on).
  JwksSource(boost::asio::io_context& ioc, const config::JwtSpec& spec, OnKeys on_keys,
             std::function<void()> taken);
  ~JwksSource();

  // A file's keys now (throws ConfigError at startup); a URL's first fetch
  // starts. Then the watching or the periodic fetch.
  void start();
  void stop();
  // A JWT named an unknown key (data layer's thread).
  void refetch();

  std::uint64_t fetches() const { return fetches_; }

 private:
  void load_file(const std::string& path);
  void fetch();
  void on_document(const std::string& text, const std::string& where);
  void arm_refresh();

  boost::asio::io_context& ioc_;
  config::JwtSpec spec_;
  OnKeys on_keys_;
  std::function<void()> taken_;
  std::unique_ptr<datalayer::FileWatcher> watcher_;
  boost::asio::steady_timer refresh_;
  boost::asio::steady_timer refetch_;
  std::chrono::steady_clock::time_point last_fetch_{};
  bool refetch_pending_ = false;
  bool fetching_ = false;  // a URL's fetch is under way
  bool loaded_once_ = false;
  bool stopped_ = false;
  std::uint64_t fetches_ = 0;
};

}  // namespace sluice::app
