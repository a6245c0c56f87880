#include "datalayer/metrics_scraper.h"

#include <pthread.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

namespace sluice::datalayer {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

// One endpoint's scrapes: one connection kept alive between them (a TLS
// session over it when the target says so, made again with each new
// connection), each scrape bounded as a whole by the timeout. Scraper
// thread only.
class MetricsScraper::Target : public std::enable_shared_from_this<Target> {
 public:
  Target(net::io_context& ioc, std::size_t index, ScrapeTarget target, ScraperOptions options,
         const Sink& sink, std::atomic<std::uint64_t>& failures,
         std::atomic<std::uint64_t>& bad_lines)
      : ioc_(ioc),
        plain_(ioc),
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
    if (!target_.authorization.empty())
      request_.set(http::field::authorization, target_.authorization);
    request_.keep_alive(true);
  }

  const ScrapeTarget& target() const { return target_; }

  void schedule(std::chrono::nanoseconds delay) {
    if (stopped_) return;
    timer_.expires_after(delay);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->stopped_) self->scrape();
    });
  }

  // Whatever is in flight ends (operation_aborted), uncounted.
  void stop() {
    stopped_ = true;
    timer_.cancel();
    tcp().close();
  }

 private:
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : plain_; }
  // `f(stream)` with the stream the HTTP exchange runs on.
  template <class F>
  void with_stream(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(plain_);
  }

  void scrape() {
    if (!connected_) return connect();
    tcp().expires_after(options_.timeout);  // the whole scrape: write, read
    send();
  }

  // A new connection (and TLS session), under the timeout with the scrape
  // that follows: connect, handshake, write, read.
  void connect() {
    if (target_.tls) {
      tls_.emplace(ioc_, *target_.tls->context);  // nothing is in flight on the old one
      if (!prepare_upstream_session(tls_->native_handle(), *target_.tls,
                                    target_.tls->name_for(target_.host)))
        return fail();
    }
    tcp().expires_after(options_.timeout);
    tcp().async_connect(target_.address, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail();
      if (self->tls_) return self->handshake();
      self->connected_ = true;
      self->send();
    });
  }

  // A certificate that does not verify fails here, as a failed scrape.
  void handshake() {
    tls_->async_handshake(net::ssl::stream_base::client,
                          [self = shared_from_this()](beast::error_code ec) {
                            if (ec) return self->fail();
                            self->connected_ = true;
                            self->send();
                          });
  }

  void send() {
    with_stream([this](auto& stream) {
      http::async_write(stream, request_,
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) return self->fail();
                          self->read();
                        });
    });
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(8u << 20);
    with_stream([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         if (ec) return self->fail();
                         self->on_response();
                       });
    });
  }

  void on_response() {
    if (stopped_) return;
    auto& res = parser_->get();
    bool used = false;
    if (res.result() == http::status::ok) {
      EngineMetrics m = parse_engine_metrics(res.body(), target_.engine);
      bad_lines_.fetch_add(m.bad_lines, std::memory_order_relaxed);
      if (m.usable()) {
        sink_(index_, m);
        used = true;
      }
    }
    if (!used) failures_.fetch_add(1, std::memory_order_relaxed);
    if (!res.keep_alive()) disconnect();
    parser_.reset();  // the body's memory, until the next scrape
    schedule(options_.interval);
  }

  void fail() {
    if (stopped_) return;  // stopped or replaced: not a failure of the endpoint
    failures_.fetch_add(1, std::memory_order_relaxed);
    disconnect();
    schedule(options_.interval);
  }

  // Closes the connection (a TLS session ends with it, without close_notify:
  // nothing more is read from it).
  void disconnect() {
    tcp().close();
    buffer_.clear();
    connected_ = false;
  }

  net::io_context& ioc_;
  beast::tcp_stream plain_;  // plain HTTP
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::size_t index_;
  ScrapeTarget target_;  // before tls_: its context outlives the session
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;  // over TLS: the connection
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
    if (!guard_) return;  // stopped: a new target would keep the thread from ending
    auto& slot = targets_[endpoint];
    if (slot) slot->stop();
    slot = std::make_shared<Target>(ioc_, endpoint, std::move(target), options_, sink_, failures_,
                                    bad_lines_);
    slot->schedule(std::chrono::nanoseconds(0));
  });
}

void MetricsScraper::update(std::size_t endpoint, ScrapeTarget target) {
  net::post(ioc_, [this, endpoint, target = std::move(target)]() mutable {
    auto it = targets_.find(endpoint);
    if (!guard_ || it == targets_.end() || it->second->target() == target) return;
    it->second->stop();
    it->second = std::make_shared<Target>(ioc_, endpoint, std::move(target), options_, sink_,
                                          failures_, bad_lines_);
    it->second->schedule(std::chrono::nanoseconds(0));
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
