// Scrapes each endpoint's /metrics on an interval (keep-alive, timeout) on a
// thread of its own, and hands every usable result to a sink on that thread.
// An endpoint is reached as the proxied requests reach it: over TLS with its
// upstream TLS setting (datalayer/upstream_tls.h; a failed handshake or
// verification is a failed scrape), with its upstream credential as the
// Authorization field. A failed or unusable scrape hands nothing: the last
// metrics age, and the saturation detector treats stale metrics as saturated.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "datalayer/prometheus_text.h"
#include "datalayer/upstream_tls.h"

namespace sluice::datalayer {

struct ScrapeTarget {
  boost::asio::ip::tcp::endpoint address;
  std::string host_port;  // for the Host header
  std::string host;       // the name a TLS session checks, unless the setting names one
  std::string engine;     // vllm | sglang | trtllm-serve
  std::string path = "/metrics";
  std::shared_ptr<const UpstreamTls> tls;  // null: plain HTTP
  std::string authorization;               // the Authorization field ("Bearer ..."); "": none
  // The same setting (TLS by context: a reload builds new ones).
  bool operator==(const ScrapeTarget&) const = default;
};

struct ScraperOptions {
  std::chrono::nanoseconds interval = std::chrono::milliseconds(50);  // GIE's refresh interval
  std::chrono::nanoseconds timeout = std::chrono::seconds(1);
};

class MetricsScraper {
 public:
  // Called on the scraper thread.
  using Sink = std::function<void(std::size_t endpoint, const EngineMetrics& metrics)>;

  // `targets[i]` is endpoint slot i.
  MetricsScraper(std::vector<ScrapeTarget> targets, ScraperOptions options, Sink sink);
  ~MetricsScraper();
  void start();
  void stop();

  // Endpoints joining or leaving the pool at runtime. Any thread.
  void add(std::size_t endpoint, ScrapeTarget target);
  void remove(std::size_t endpoint);
  // An endpoint's settings after a reload (its TLS, its credential): if
  // they differ from its current ones, its connection is closed and the
  // next scrape (at once) connects with them; nothing for an endpoint not
  // scraped. Any thread.
  void update(std::size_t endpoint, ScrapeTarget target);

  // The scraper thread's context: the data layer's other periodic work
  // (the endpoints-file watcher) runs here too.
  boost::asio::io_context& context() { return ioc_; }

  // Scrapes that failed (connect, TLS handshake or verification, timeout,
  // bad status, nothing usable) and lines skipped as malformed, over all
  // endpoints. Any thread.
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  std::uint64_t bad_lines() const { return bad_lines_.load(std::memory_order_relaxed); }

 private:
  class Target;
  boost::asio::io_context ioc_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::map<std::size_t, std::shared_ptr<Target>> targets_;  // scraper thread only, once started
  ScraperOptions options_;
  Sink sink_;
  std::thread thread_;
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> bad_lines_{0};
};

}  // namespace sluice::datalayer
