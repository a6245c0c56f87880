// The README's Limits table, row by row: each fixed bound hit on the wire,
// with what the table says happens then, and that nothing else was lost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "flow_control_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

FakeUpstream::Reply echo_head(const UpstreamRequest& r) {
  return FakeUpstream::Reply{FakeUpstream::response(
      200, json{{"request_id", r.header("x-request-id")}, {"body", r.body}}.dump())};
}

std::string post(const std::string& body, const std::string& extra_headers = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// x-request-id: kept up to 128 token bytes; longer (or with other bytes) it
// is replaced by a generated id, towards the endpoint and the client alike.
TEST(Limits, RequestIdsPast128BytesAreReplacedByAGeneratedOne) {
  FakeUpstream up(echo_head);
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  const std::string at_limit(128, 'a'), past_limit(129, 'b');
  auto kept = client.post_json("/v1/completions", completion_body(1), {{"x-request-id", at_limit}});
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.header("x-request-id"), at_limit);
  EXPECT_EQ(json::parse(kept.body)["request_id"], at_limit);
  auto replaced =
      client.post_json("/v1/completions", completion_body(1), {{"x-request-id", past_limit}});
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  const std::string generated = replaced.header("x-request-id");
  EXPECT_EQ(generated.size(), 32u) << generated;
  EXPECT_TRUE(std::all_of(generated.begin(), generated.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c));
  })) << generated;
  EXPECT_EQ(json::parse(replaced.body)["request_id"], generated);
  EXPECT_EQ(up.requests().size(), 2u);
}

// Interim responses: at most 8 before the final one; the ninth makes the
// answer an upstream error (502 upstream-error), and the connection is not
// reused.
TEST(Limits, MoreThanEightInterimResponsesAreAnUpstreamError) {
  std::atomic<int> interim{8};
  FakeUpstream up([&](const UpstreamRequest& r) {
    std::string bytes;
    for (int i = 0; i < interim.load(); ++i)
      bytes += "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
    return FakeUpstream::Reply{bytes + FakeUpstream::response(200, "{\"ok\":1}"), true};
  });
  TempFile cfg(make_config({up.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  auto eight = client.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(eight.status, 200) << eight.body;  // the client skips the relayed 103s
  interim = 9;
  HttpClient client2(kHost, sluice->port());
  auto nine = client2.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(nine.status, 502) << nine.body;
  EXPECT_EQ(json::parse(nine.body)["error"]["code"], "upstream-error");
  interim = 0;
  HttpClient client3(kHost, sluice->port());
  EXPECT_EQ(client3.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(up.requests().size(), 3u);
}

// A response head over 64 KiB is an upstream error (502), not memory.
TEST(Limits, AResponseHeadOver64KiBIsAnUpstreamError) {
  std::atomic<std::size_t> header_bytes{60 * 1024};
  FakeUpstream up([&](const UpstreamRequest&) {
    return FakeUpstream::Reply{
        FakeUpstream::response(200, "{\"ok\":1}",
                               "X-Big: " + std::string(header_bytes.load(), 'h') + "\r\n"),
        true};
  });
  TempFile cfg(make_config({up.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg);
  {
    // 60 KiB of head is relayed (read raw: the test's HTTP client takes 8 KiB).
    RawConnection raw(kHost, sluice->port());
    ASSERT_TRUE(raw.send(post(completion_body(1), "Connection: close\r\n")));
    bool closed = false;
    const std::string got = raw.read_until_close(10000ms, &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got.substr(0, 100);
    EXPECT_NE(got.find(std::string(60 * 1024, 'h')), std::string::npos);
  }
  header_bytes = 65 * 1024;
  HttpClient b(kHost, sluice->port());
  auto r = b.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(r.status, 502) << r.body.substr(0, 200);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "upstream-error");
  header_bytes = 10;
  HttpClient c(kHost, sluice->port());
  EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
}

// A trailer well over 64 KiB after a relayed stream: the stream is cut (the
// transfer left incomplete), and the next request is served. (The bound is
// checked after each read of up to 16 KiB, so a trailer that ends within
// the read that crosses 64 KiB still passes: it is dropped, not relayed.)
TEST(Limits, ATrailerOver64KiBCutsTheStream) {
  FakeUpstream up([&](const UpstreamRequest& r) {
    if (r.body.find("\"stream\":true") == std::string::npos)
      return FakeUpstream::Reply{FakeUpstream::response(200, "{\"ok\":1}")};
    return FakeUpstream::Reply{
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        "f\r\ndata: {\"a\":1}\n\n\r\n0\r\nX-Trailer: " +
            std::string(200 * 1024, 't') + "\r\n\r\n",
        true};
  });
  TempFile cfg(make_config({up.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  auto s = client.stream("/v1/completions", completion_body(1, true));
  EXPECT_EQ(s.head.status, 200);
  EXPECT_FALSE(s.complete);
  ASSERT_GE(s.events.size(), 1u);
  EXPECT_EQ(s.events[0].data, "{\"a\":1}");
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(),
                         "sluice_requests_total{outcome=\"upstream-error\"}") == 1;
  }));
  HttpClient next(kHost, sluice->port());
  EXPECT_EQ(next.post_json("/v1/completions", completion_body(1)).status, 200);
}

// server.bodyReadTimeout: a body that stops coming is cut (the connection
// closed, no answer: slowloris), and others are served meanwhile.
TEST(Limits, ABodyThatStopsComingIsClosedAtTheBodyReadTimeout) {
  FakeUpstream up(echo_head);
  TempFile cfg(make_config({up.address()}, "  bodyReadTimeout: 300ms\n"));
  auto sluice = start_sluice(cfg);
  RawConnection slow(kHost, sluice->port());
  const std::string body = completion_body(1);
  const auto started = Clock::now();
  // The head and half of the body, then nothing.
  ASSERT_TRUE(slow.send(post(body).substr(0, post(body).size() - body.size() / 2)));
  HttpClient other(kHost, sluice->port());
  EXPECT_EQ(other.post_json("/v1/completions", completion_body(1)).status, 200);
  bool closed = false;
  const std::string got = slow.read_until_close(30000ms, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got, "");
  EXPECT_GE(Clock::now() - started, 250ms);  // at the timeout, not before
  EXPECT_EQ(up.requests().size(), 1u);       // the cut request never reached the endpoint
}

// The endpoint holds each request until the test lets it go.
class HeldUpstream {
 public:
  HeldUpstream()
      : up_([this](const UpstreamRequest& r) {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, std::chrono::seconds(30), [&] { return released_; });
          return FakeUpstream::Reply{FakeUpstream::response(200, json{{"body", r.body}}.dump())};
        }) {}
  ~HeldUpstream() { release(); }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  FakeUpstream& up() { return up_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  FakeUpstream up_;
};

// A client's max_tokens counts for tokens-mode admission at most 2^24 (the
// body goes as sent): two requests asking for 2^40 tokens each fit under a
// limit of 2^25 tokens in flight, and a third waits; unclamped, the second
// would wait too (or the sums wrap).
TEST(Limits, MaxTokensCountsForAdmissionAtMost2To24) {
  HeldUpstream held;
  const std::string config =
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\nendpoints:\n  - address: " +
      held.up().address() +
      "\nfeatureGates: [flowControl]\nplugins:\n  - type: concurrency-detector\n"
      "    parameters: {concurrencyMode: tokens, maxTokenConcurrency: 33554432}\n"
      "saturationDetector: {pluginRef: concurrency-detector}\n";
  TempFile cfg(config);
  auto sluice = start_sluice(cfg);
  const std::string huge =
      R"({"model":"mock-model","prompt":"hi","max_tokens":1099511627776})";  // 2^40
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&] {
      HttpClient c(kHost, sluice->port(), 60000ms);
      ok += c.post_json("/v1/completions", huge).status == 200;
    });
    if (i < 2) {
      EXPECT_TRUE(eventually([&] { return held.up().requests().size() == std::size_t(i) + 1; }))
          << "request " << i << " was not admitted";
    }
  }
  // The third is queued: 2 x 2^24 (and the prompts) is past 2^25.
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(),
                         "inference_extension_flow_control_queue_size{fairness_id=\"default-"
                         "flow\",priority=\"0\"}") == 1;
  }));
  EXPECT_EQ(held.up().requests().size(), 2u);
  held.release();
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 3);
  ASSERT_EQ(held.up().requests().size(), 3u);
  for (const auto& r : held.up().requests()) EXPECT_EQ(r.body, huge);  // as sent
}

// The access log's buffer: 4 MiB per I/O thread. With the reader stalled,
// lines past it are dropped and counted; requests never wait for the log,
// and every line is either written or counted.
TEST(Limits, AccessLogLinesPastTheBufferAreDroppedAndCounted) {
  FakeUpstream up(echo_head);
  TempFile dir_holder("", "placeholder");
  const std::string fifo = dir_holder.path() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  TempFile cfg(make_config({up.address()}, "  accessLog: " + fifo + "\n"));
  auto sluice = start_sluice(cfg);
  // Requests for 12 KiB paths (404s: their lines hold the path): 500 lines
  // of ~12 KiB are ~6 MiB, past the 4 MiB buffer and the pipe's 64 KiB.
  constexpr int kRequests = 500;
  const std::string path = "/v1/" + std::string(12 * 1024, 'p');
  HttpClient c(kHost, sluice->port(), 10000ms);
  int answered = 0;
  for (int i = 0; i < kRequests; ++i) answered += c.request("GET", path).status == 404;
  EXPECT_EQ(answered, kRequests);
  double dropped = 0;
  EXPECT_TRUE(eventually([&] {
    dropped = scrape_metric(kHost, sluice->admin_port(), "sluice_access_log_dropped_total");
    return dropped > 0;
  }));
  // Drain: what was not dropped arrives, and the two add up.
  std::string got;
  auto lines = [&] { return std::count(got.begin(), got.end(), '\n'); };
  EXPECT_TRUE(eventually(
      [&] {
        char buf[65536];
        for (ssize_t n; (n = ::read(reader, buf, sizeof buf)) > 0;)
          got.append(buf, static_cast<std::size_t>(n));
        dropped = scrape_metric(kHost, sluice->admin_port(), "sluice_access_log_dropped_total");
        return lines() + dropped == kRequests;
      },
      20000ms))
      << lines() << " lines, " << dropped << " dropped";
  // At least 4 MiB of lines were buffered before the first drop.
  EXPECT_GE(got.size(), 4u << 20);
  ::close(reader);
}

// Endpoints: at most 4096 in a config file; an endpoints file listing more
// is refused (the pool stays), and the pool's 4096 slots, once all used in
// a run, take no new address (logged, not added).
TEST(Limits, At4096EndpointsAFileIsRefusedAndANewAddressIsNotAdded) {
  auto endpoints_text = [](int first_port, int n) {
    std::string t = "endpoints:\n";
    for (int i = 0; i < n; ++i)
      t += "  - address: 127.0.0.1:" + std::to_string(first_port + i) + "\n";
    return t;
  };
  {
    TempFile cfg("server:\n  listen: 127.0.0.1:0\n" + endpoints_text(10000, 4097));
    std::string err;
    Process::Options o;
    o.wait_for_listen = false;
    o.capture_stderr = true;
    auto p = Process::start({SLUICE_BIN, "--config", cfg.path()}, o);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->wait(30000ms), 2);
    EXPECT_NE(p->stderr_text().find("at most 4096 endpoints (4097 given)"), std::string::npos)
        << p->stderr_text().substr(0, 300);
  }
  FakeUpstream up(echo_head);
  // 4095 addresses nobody listens on, and the fake: the pool's 4096 slots.
  TempFile endpoints(endpoints_text(20000, 4095) + "  - address: " + up.address() + "\n",
                     "endpoints.yaml");
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n  metricsRefreshInterval: 60s\n"
      "  endpointDownBackoff: 60s\n  endpointsFile: " +
      endpoints.path() + "\n  endpointsFilePollInterval: 20ms\n");
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(sluice);
  HttpClient admin(kHost, sluice->admin_port());
  EXPECT_TRUE(eventually(
      [&] {
        return admin.request("GET", "/admin/v1/endpoints?limit=1").header("x-total-count") ==
               "4096";
      },
      30000ms));
  // More than 4096 in the file: refused, the pool stays.
  {
    std::ofstream out(endpoints.path() + ".tmp");
    out << endpoints_text(20000, 4097);
  }
  ASSERT_EQ(std::rename((endpoints.path() + ".tmp").c_str(), endpoints.path().c_str()), 0);
  EXPECT_TRUE(eventually(
      [&] { return sluice->stderr_now().find("at most 4096 endpoints") != std::string::npos; }));
  EXPECT_EQ(admin.request("GET", "/admin/v1/endpoints?limit=1").header("x-total-count"), "4096");
  // A file within the bound that names a 4097th address: every slot has
  // been used in this run, so it is logged and not added.
  {
    std::ofstream out(endpoints.path() + ".tmp");
    out << "endpoints:\n  - address: " << up.address() << "\n  - address: 127.0.0.1:19999\n";
  }
  ASSERT_EQ(std::rename((endpoints.path() + ".tmp").c_str(), endpoints.path().c_str()), 0);
  EXPECT_TRUE(eventually([&] {
    return sluice->stderr_now().find("pool full; 127.0.0.1:19999 not added") != std::string::npos;
  }));
  // The fake still serves (its slot kept).
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
