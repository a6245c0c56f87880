#include "datalayer/metrics_scraper.h"

#include <pthread.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

namespace sluice::datalayer {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

class MetricsScraper::Target : public std::enable_shared_from_this<Target> {
 public:
  Target(net::io_context& ioc, std::size_t index, ScrapeTarget target, ScraperOptions options,
         const Sink& sink, std::atomic<std::uint64_t>& failures,
         std::atomic<std::uint64_t>& bad_lines)
      : stream_(ioc),
        timer_(ioc),
        index_(index),
        target_(std::move(target)),
        options_(options),
        sink_(sink),
        failures_(failures),
        bad_lines_(bad_lines) {
    request_.method(http::verb::get);
    request_.target(target_.path);
    request_.version(11);
    request_.set(http::field::host, target_.host_port);
    request_.set(http::field::user_agent, "sluice-scraper");
    request_.keep_alive(true);
  }

  void schedule(std::chrono::nanoseconds delay) {
    if (stopped_) return;
    timer_.expires_after(delay);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->stopped_) self->scrape();
    });
  }

  void stop() {
    stopped_ = true;
    timer_.cancel();
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

 private:
  void scrape() {
    stream_.expires_after(options_.timeout);  // the whole scrape: connect, write, read
    if (connected_) return send();
    stream_.async_connect(target_.address, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail();
      self->connected_ = true;
      self->send();
    });
  }

  void send() {
    http::async_write(stream_, request_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return self->fail();
                        self->read();
                      });
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(8u << 20);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->fail();
                       auto& res = self->parser_->get();
                       bool used = false;
                       if (res.result() == http::status::ok) {
                         EngineMetrics m = parse_engine_metrics(res.body(), self->target_.engine);
                         self->bad_lines_.fetch_add(m.bad_lines, std::memory_order_relaxed);
                         if (m.usable()) {
                           self->sink_(self->index_, m);
                           used = true;
                         }
                       }
                       if (!used) self->failures_.fetch_add(1, std::memory_order_relaxed);
                       if (!res.keep_alive()) self->disconnect();
                       self->schedule(self->options_.interval);
                     });
  }

  void fail() {
    failures_.fetch_add(1, std::memory_order_relaxed);
    disconnect();
    schedule(options_.interval);
  }

  void disconnect() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    buffer_.clear();
    connected_ = false;
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::size_t index_;
  ScrapeTarget target_;
  ScraperOptions options_;
  const Sink& sink_;
  std::atomic<std::uint64_t>& failures_;
  std::atomic<std::uint64_t>& bad_lines_;
  bool connected_ = false;
  bool stopped_ = false;
};

MetricsScraper::MetricsScraper(std::vector<ScrapeTarget> targets, ScraperOptions options, Sink sink)
    : options_(options), sink_(std::move(sink)) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    targets_[i] = std::make_shared<Target>(ioc_, i, std::move(targets[i]), options_, sink_,
                                           failures_, bad_lines_);
}

MetricsScraper::~MetricsScraper() { stop(); }

void MetricsScraper::start() {
  for (auto& [i, t] : targets_) t->schedule(std::chrono::nanoseconds(0));
  guard_.emplace(net::make_work_guard(ioc_));  // runs even with no endpoint yet
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-scrape");
    ioc_.run();
  });
}

void MetricsScraper::add(std::size_t endpoint, ScrapeTarget target) {
  net::post(ioc_, [this, endpoint, target = std::move(target)]() mutable {
    auto& slot = targets_[endpoint];
    if (slot) slot->stop();
    slot = std::make_shared<Target>(ioc_, endpoint, std::move(target), options_, sink_, failures_,
                                    bad_lines_);
    slot->schedule(std::chrono::nanoseconds(0));
  });
}

void MetricsScraper::remove(std::size_t endpoint) {
  net::post(ioc_, [this, endpoint] {
    auto it = targets_.find(endpoint);
    if (it == targets_.end()) return;
    it->second->stop();
    targets_.erase(it);
  });
}

void MetricsScraper::stop() {
  if (!thread_.joinable()) return;
  net::post(ioc_, [this] {
    for (auto& [i, t] : targets_) t->stop();
    guard_.reset();
  });
  thread_.join();  // run() returns once every target's operations have ended
}

}  // namespace sluice::datalayer
