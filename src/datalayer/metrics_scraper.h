// Scrapes each endpoint's /metrics on an interval (keep-alive, timeout) on a
// thread of its own, and hands every usable result to a sink on that thread.
// A failed or unusable scrape hands nothing: the last metrics age, and the
// saturation detector treats stale metrics as saturated.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "datalayer/prometheus_text.h"

namespace sluice::datalayer {

struct ScrapeTarget {
  boost::asio::ip::tcp::endpoint address;
  std::string host_port;  // for the Host header
  std::string engine;     // vllm | sglang | trtllm-serve
};

struct ScraperOptions {
  std::chrono::nanoseconds interval = std::chrono::milliseconds(50);  // GIE's refresh interval
  std::chrono::nanoseconds timeout = std::chrono::seconds(1);
};

class MetricsScraper {
 public:
  // Called on the scraper thread.
  using Sink = std::function<void(std::size_t endpoint, const EngineMetrics& metrics)>;

  MetricsScraper(std::vector<ScrapeTarget> targets, ScraperOptions options, Sink sink);
  ~MetricsScraper();
  void start();
  void stop();

 private:
  class Target;
  boost::asio::io_context ioc_{1};
  std::vector<std::shared_ptr<Target>> targets_;
  Sink sink_;
  std::thread thread_;
};

}  // namespace sluice::datalayer
