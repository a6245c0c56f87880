// Endpoints that fail in ways a connect check does not see, and the
// gateway's own blocking points: passive health (ejection after consecutive
// failures, re-admission after the backoff), fallbacks that respect the
// saturation detector, rate-limited warnings, an access log that never
// stalls an I/O thread, and the admin listener at the descriptor limit.
// Real sluice and sluice-mock processes on loopback, FakeUpstream for the
// misbehaving endpoint.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "harness.h"
#include "support/fake_upstream.h"
#include "support/requires.h"

namespace sluice::test {
namespace {

const std::string kHost = "127.0.0.1";

// A completion SSE event with `text`, as an engine streams it.
std::string sse_event(const std::string& text) {
  return "data: {\"choices\":[{\"text\":\"" + text + "\",\"index\":0}]}\n\n";
}
// `data` as one chunk of a chunked body.
std::string as_chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", data.size());
  return std::string(size) + "\r\n" + data + "\r\n";
}
const std::string kSseHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

// An endpoint that accepts, reads the request and closes without a byte.
FakeUpstream::Reply close_at_once(const UpstreamRequest&) { return {"", true}; }

std::string ejections_metric(const std::string& address) {
  return "sluice_endpoint_ejections_total{endpoint=\"" + address + "\"}";
}

// The scheduler's least-in-flight profile: equal endpoints tie, so without
// passive health the broken one gets about half of sequential requests.
const std::string kLeastInFlight = R"(plugins:
- type: in-flight-requests-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: in-flight-requests-scorer
  - pluginRef: max-score-picker
)";

TEST(EndpointFaults, AcceptThenCloseEndpointIsEjectedAndTriedAgain) {
  FakeUpstream bad(close_at_once);
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  ASSERT_TRUE(mock);
  constexpr int kThreshold = 3;
  TempFile cfg(make_config({bad.address(), mock->address()},
                           "  endpointEjectionConsecutiveFailures: 3\n"
                           "  endpointEjectionBaseTime: 1s\n"
                           "  endpointEjectionMaxTime: 4s\n") +
               kLeastInFlight);
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);

  HttpClient c(kHost, sluice->port());
  int served_by_mock = 0, bad_gateway = 0, other = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = c.post_json("/v1/completions", completion_body(1));
    if (r.status == 200 && r.header("x-gateway-destination-endpoint-served") == mock->address())
      ++served_by_mock;
    else if (r.status == 502)
      ++bad_gateway;
    else
      ++other;
  }
  const double ejections =
      scrape_metric(kHost, sluice->admin_port(), ejections_metric(bad.address()));
  // Sequential requests: the threshold's failures eject it; each later
  // ejection (after a backoff ran out) costs exactly one more failure.
  EXPECT_GE(ejections, 1);
  EXPECT_LE(ejections, 4);  // 1 s, 2 s, 4 s backoffs: the run is shorter than that
  EXPECT_LE(bad_gateway, kThreshold + static_cast<int>(ejections) - 1);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(served_by_mock + bad_gateway, 200);
  EXPECT_EQ(static_cast<int>(bad.requests().size()), bad_gateway);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), served_by_mock);

  // After the backoff the endpoint is tried again (and, failing once more,
  // ejected again at once).
  const std::size_t tried = bad.requests().size();
  EXPECT_TRUE(eventually(
      [&] {
        c.post_json("/v1/completions", completion_body(1));
        return bad.requests().size() > tried;
      },
      15000ms));
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(), ejections_metric(bad.address())) > ejections;
  }));
  EXPECT_EQ(sluice->stop(), 0);
}

// One success clears the streak: an endpoint that fails now and then, with
// a success in between, is never ejected.
TEST(EndpointFaults, SuccessBetweenFailuresResetsTheCount) {
  std::atomic<int> n{0};
  FakeUpstream flaky([&](const UpstreamRequest&) -> FakeUpstream::Reply {
    if (n++ % 2 == 0) return {"", true};
    // Closed after each answer: no pooled connection (and no stale-retry)
    // between the two kinds.
    return {FakeUpstream::response(200, R"({"choices":[]})"), true};
  });
  TempFile cfg(make_config({flaky.address()}, "  endpointEjectionConsecutiveFailures: 2\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  int ok = 0, bad = 0;
  for (int i = 0; i < 20; ++i) {
    const int status = c.post_json("/v1/completions", completion_body(1)).status;
    ok += status == 200;
    bad += status == 502;
  }
  EXPECT_EQ(ok, 10);
  EXPECT_EQ(bad, 10);
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), ejections_metric(flaky.address())), 0);
}

// An endpoint that closes each connection right after a keep-alive answer
// (no Connection: close): sluice pools the connection, having read the
// answer, and tells its reactor the socket is drained (the next read waits
// for readiness instead of trying a receive, proxy/reactor_hint.h) — the
// close may have arrived in that moment. The next request's bytes draw a
// reset (an event), and it is retried once on a fresh connection: every
// request is answered, none waits for the upstream timeout (120 s: such a
// request would outlast the client's own 15 s and get no answer).
TEST(EndpointFaults, AnEndpointClosingRightAfterEachAnswerCostsNoRequest) {
  FakeUpstream closing([](const UpstreamRequest&) -> FakeUpstream::Reply {
    return {FakeUpstream::response(200, R"({"choices":[]})"), true};
  });
  TempFile cfg(make_config({closing.address()}));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  for (int i = 0; i < 30; ++i) {
    auto r = c.post_json("/v1/completions", completion_body(1));
    EXPECT_EQ(r.status, 200) << "request " << i << ": " << r.error << r.body;
  }
  EXPECT_EQ(closing.requests().size(), 30u);
  EXPECT_EQ(sluice->stop(), 0);
}

// An engine that sends an event and dies in the same segment, mid-stream.
// The read that takes the event leaves the next one waiting for readiness
// (proxy/hinted_reads.h), and the close came with the event, so the
// reactor will not report it again: only the I/O thread's close watch sees
// it. The stream must end with an error event at once, not at the upstream
// idle timeout (20 s here). Two ways: the head, an event and the close in
// one segment (the close is there when the connection is first watched);
// and an event, then, once the client has it (the connection watched since
// then), another event with the close in one segment.
TEST(EndpointFaults, ACloseThatCameWithAStreamsLastEventEndsItAtOnce) {
  const auto& event = sse_event;
  const auto& chunk = as_chunk;
  const std::string& head = kSseHead;
  std::mutex mu;
  std::condition_variable cv;
  bool client_has_first = false;
  std::atomic<int> served{0};
  FakeUpstream dying([&](const UpstreamRequest&) {
    FakeUpstream::Reply r;
    r.close_after = true;
    r.close_with_bytes = true;
    if (served++ % 2 == 0) {
      r.bytes = head + chunk(event("a"));
      return r;
    }
    r.bytes = head + chunk(event("a"));
    r.then = [&] {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return client_has_first; });
      return chunk(event("b"));
    };
    return r;
  });
  TempFile cfg(make_config({dying.address()}, "  upstreamIdleTimeout: 20s\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  for (int i = 0; i < 4; ++i) {
    const bool later = i % 2 == 1;
    {
      std::lock_guard lock(mu);
      client_has_first = false;
    }
    HttpClient client(kHost, sluice->port(), std::chrono::seconds(60));
    const auto t0 = Clock::now();
    auto r = client.stream("/v1/completions", completion_body(100, true), {},
                           [&](const Response&, const SseEvent&) {
                             {
                               std::lock_guard lock(mu);
                               client_has_first = true;
                             }
                             cv.notify_all();
                             return true;
                           });
    const auto took = Clock::now() - t0;
    EXPECT_EQ(r.head.status, 200) << r.error;
    ASSERT_LT(took, std::chrono::seconds(10))
        << "stream " << i << " waited for the idle timeout" << (later ? " (close later)" : "");
    EXPECT_FALSE(r.complete);
    ASSERT_EQ(r.events.size(), later ? 3u : 2u) << "stream " << i;
    EXPECT_EQ(r.events[0].data + "\n\n", event("a").substr(6));
    if (later) {
      EXPECT_EQ(r.events[1].data + "\n\n", event("b").substr(6));
    }
    auto last = nlohmann::json::parse(r.events.back().data, nullptr, false);
    ASSERT_FALSE(last.is_discarded()) << r.events.back().data;
    EXPECT_EQ(last["error"]["code"], "upstream-error");
  }
  EXPECT_EQ(dying.requests().size(), 4u);
  EXPECT_EQ(sluice->stop(), 0);
}

// A stream's next read waits for readiness (the hint); what the parser
// cannot take yet (a chunk-size line cut in two) stays in the connection's
// buffer and is parsed with the bytes that follow. The second part of the
// answer comes
// only once the client has the first event, so it is a read of its own,
// cut at every place in the chunk that follows: inside the size line,
// before its CRLF, inside the data, inside the CRLF after it, and at the
// end of the chunk. Every answer arrives whole (the endpoint keeps its
// connections open, so a later answer may come on the same one).
TEST(EndpointFaults, AStreamCutAnywhereBetweenTwoReadsArrivesWhole) {
  const auto& event = sse_event;
  const auto& chunk = as_chunk;
  const std::string& head = kSseHead;
  const std::string second = chunk(event("b"));  // "2f\r\ndata: ...\r\n"
  const std::vector<std::size_t> cuts = {1, 2, 3, 4, 10, second.size() - 1, second.size()};
  std::mutex mu;
  std::condition_variable cv;
  bool client_has_first = false;
  std::atomic<std::size_t> served{0};
  FakeUpstream upstream([&](const UpstreamRequest&) {
    const std::size_t cut = cuts[served++ % cuts.size()];
    FakeUpstream::Reply r;
    r.bytes = head + chunk(event("a")) + second.substr(0, cut);
    r.then = [&, cut] {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return client_has_first; });
      return second.substr(cut) + "0\r\n\r\n";
    };
    return r;
  });
  TempFile cfg(make_config({upstream.address()}));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient client(kHost, sluice->port(), std::chrono::seconds(30));
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    {
      std::lock_guard lock(mu);
      client_has_first = false;
    }
    auto r = client.stream("/v1/completions", completion_body(100, true), {},
                           [&](const Response&, const SseEvent&) {
                             {
                               std::lock_guard lock(mu);
                               client_has_first = true;
                             }
                             cv.notify_all();
                             return true;
                           });
    EXPECT_EQ(r.head.status, 200) << r.error;
    EXPECT_TRUE(r.complete) << "cut at " << cuts[i] << ": " << r.error;
    ASSERT_EQ(r.events.size(), 2u) << "cut at " << cuts[i];
    EXPECT_EQ(r.events[0].data + "\n\n", event("a").substr(6));
    EXPECT_EQ(r.events[1].data + "\n\n", event("b").substr(6)) << "cut at " << cuts[i];
  }
  EXPECT_EQ(upstream.requests().size(), cuts.size());
  EXPECT_EQ(sluice->stop(), 0);
}

// The last usable endpoint is never ejected: its failures are counted, the
// clients get 502 (not 503), and a recovery would be seen at once.
TEST(EndpointFaults, LastUsableEndpointIsNotEjected) {
  FakeUpstream bad(close_at_once);
  TempFile cfg(make_config({bad.address()}));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 502);
  EXPECT_EQ(bad.requests().size(), 10u);
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), ejections_metric(bad.address())), 0);
}

// Flow control on, concurrency limit 8, one endpoint refusing connections:
// the requests the dispatcher sent there fall back to the other endpoint
// only while it has room. The model server never runs more than the limit;
// what finds no room ends 503 rejected-no-endpoints with Retry-After.
TEST(EndpointFaults, FallbackRespectsTheSaturationDetector) {
  constexpr int kLimit = 8;
  auto mock = start_mock({"--decode-ms-per-token", "20", "--max-running", "64"});
  ASSERT_TRUE(mock);
  ClosedPort refusing;  // held until the test ends
  const std::string dead = refusing.address();
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 2\n"
      "endpoints:\n  - address: " +
      dead + "\n  - address: " + mock->address() +
      "\n"
      "featureGates: [flowControl]\n"
      "plugins:\n"
      "- type: concurrency-detector\n"
      "  parameters: {maxConcurrency: " +
      std::to_string(kLimit) +
      "}\n"
      "- type: in-flight-requests-scorer\n"
      "- type: max-score-picker\n"
      "  parameters: {maxNumOfEndpoints: 2}\n"
      "schedulingProfiles:\n"
      "- name: default\n"
      "  plugins:\n"
      "  - pluginRef: in-flight-requests-scorer\n"
      "  - pluginRef: max-score-picker\n"
      "saturationDetector: {pluginRef: concurrency-detector}\n");
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);

  std::atomic<int> clients_left{16};
  std::atomic<int> served{0}, rejected{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&] {
      HttpClient c(kHost, sluice->port(), 30000ms);
      for (int i = 0; i < 6; ++i) {
        auto r = c.post_json("/v1/completions", completion_body(10));
        if (r.status == 200) {
          ++served;
        } else if (r.status == 503 &&
                   r.header("x-gateway-inference-dropped-reason") == "rejected-no-endpoints" &&
                   !r.header("retry-after").empty()) {
          ++rejected;
        } else {
          ++wrong;
        }
      }
      --clients_left;
    });
  }
  // The model server's own count, sampled while the load runs; both gauges
  // from one page, or a request seen running in one scrape and its successor
  // seen waiting in the next would add up to one more than ever ran at once.
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string waiting = "vllm:num_requests_waiting{model_name=\"mock-model\"}";
  double peak = 0;
  int samples = 0;
  while (clients_left.load() > 0) {
    const auto page = scrape_metrics(kHost, mock->port(), {running, waiting});
    const double r = page[0];
    const double w = page[1];
    if (r >= 0 && w >= 0) {
      peak = std::max(peak, r + w);
      ++samples;
    }
  }
  for (auto& t : clients) t.join();
  std::cout << "peak on the endpoint " << peak << " (" << samples << " samples); served " << served
            << ", rejected " << rejected << "\n";
  EXPECT_GT(samples, 10);
  EXPECT_GE(peak, 1);
  EXPECT_LE(peak, kLimit);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(served + rejected, 96);
  EXPECT_GE(served.load(), kLimit);
  EXPECT_EQ(sluice->stop(), 0);
}

// Every failure of an endpoint is a warning, but a few a second at most from
// one place, then a line saying how many were held back.
TEST(EndpointFaults, UpstreamFailureWarningsAreRateLimited) {
  FakeUpstream bad(close_at_once);
  TempFile cfg(make_config({bad.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  // Warning lines written, and failures counted in "K similar line(s)
  // suppressed" lines, in `text`.
  struct Lines {
    int written = 0, held_back = 0;
  };
  auto count = [](const std::string& text) {
    Lines n;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.find("failed while") != std::string::npos) ++n.written;
      const auto at = line.find(" similar line(s) suppressed");
      if (at != std::string::npos)
        n.held_back += std::stoi(line.substr(line.rfind(' ', at - 1) + 1));
    }
    return n;
  };
  constexpr int kBurst = 100;
  const auto started = Clock::now();
  for (int i = 0; i < kBurst; ++i)
    ASSERT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 502);
  // The burst may span several of the limiter's 1 s windows (its first
  // starts at the first failure). What a window held back is said only with
  // the first line of the next one, so the last window's count needs one
  // more failure at least a second after the previous one: that one surely
  // opens a new window, is written, and brings the count before it.
  int failures = kBurst;
  auto last_failure = Clock::now();
  EXPECT_TRUE(eventually(
      [&] {
        const Lines n = count(sluice->stderr_now());
        if (n.written + n.held_back >= kBurst) return true;
        if (Clock::now() - last_failure >= 1s) {
          ++failures;
          EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 502);
          last_failure = Clock::now();
        }
        return false;
      },
      10000ms));
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  EXPECT_EQ(sluice->stop(), 0);
  const std::string& err = sluice->stderr_text();
  const Lines n = count(err);
  // Every failure is either a line or counted in a "suppressed" line (the
  // failures are sequential, so the limiter's count is exact, and the last
  // one left nothing held back), and the lines are few: at most 5 in each
  // window, a window a second at most.
  EXPECT_GT(n.held_back, 0) << err;
  EXPECT_LE(n.written, static_cast<int>(5 * (elapsed_s + 2))) << "in " << elapsed_s << " s\n"
                                                              << err;
  EXPECT_EQ(n.written + n.held_back, failures) << err;
}

// An access log nobody reads (a FIFO whose reader is stalled) never blocks
// an I/O thread: requests are served while the lines wait in the buffer;
// every line arrives once the reader drains; a line that cannot be written
// (the reader left) is counted in sluice_access_log_dropped_total.
TEST(EndpointFaults, StalledAccessLogNeverBlocksRequests) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  ASSERT_TRUE(mock);
  TempFile dir_holder("", "placeholder");
  const std::string fifo = dir_holder.path() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  TempFile cfg(make_config({mock->address()}, "  accessLog: " + fifo + "\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);

  // Far more than the pipe holds (64 KiB: ~200 lines); with a synchronous
  // write the I/O thread would block on the first line that does not fit.
  constexpr int kRequests = 1000;
  HttpClient c(kHost, sluice->port(), 5000ms);
  int ok = 0;
  for (int i = 0; i < kRequests; ++i)
    ok += c.post_json("/v1/completions", completion_body(1)).status == 200;
  EXPECT_EQ(ok, kRequests);

  // Drain: every line arrives.
  std::string got;
  auto lines = [&] { return std::count(got.begin(), got.end(), '\n'); };
  EXPECT_TRUE(eventually(
      [&] {
        char buf[65536];
        ssize_t n;
        while ((n = ::read(reader, buf, sizeof buf)) > 0)
          got.append(buf, static_cast<std::size_t>(n));
        return lines() >= kRequests;
      },
      20000ms));
  EXPECT_EQ(lines(), kRequests);
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), "sluice_access_log_dropped_total"), 0);

  // The reader leaves: lines are lost, and counted.
  ::close(reader);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(), "sluice_access_log_dropped_total") == 10;
  }));
  EXPECT_EQ(sluice->stop(), 0);
}

// Lines still buffered at shutdown are written before the process exits.
TEST(EndpointFaults, AccessLogIsFlushedOnShutdown) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  ASSERT_TRUE(mock);
  TempFile log("", "access.log");
  TempFile cfg(make_config({mock->address()}, "  accessLog: " + log.path() + "\n"));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(c.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(sluice->stop(), 0);
  std::ifstream in(log.path());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 50);
}

// CPU ticks (user + system) the process has used, from /proc/PID/stat.
long cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close_paren + 2));
  std::string f;
  long utime = 0, stime = 0;
  // Fields after the command: state is field 3; utime 14, stime 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stol(f);
    if (i == 15) stime = std::stol(f);
  }
  return utime + stime;
}

int open_fds(pid_t pid) {
  int n = 0;
  // /proc/PID/fd lists one entry per open descriptor.
  if (auto* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (auto* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// At the descriptor limit the admin listener's accept fails (EMFILE) with
// connections still pending; re-arming at once would spin a core. It backs
// off instead (bounded CPU over a window), and answers again once
// descriptors are free.
TEST(EndpointFaults, AdminAcceptBacksOffAtTheDescriptorLimit) {
  const std::string prlimit = "/usr/bin/prlimit";  // util-linux
  SLUICE_REQUIRE(::access(prlimit.c_str(), X_OK) == 0, prlimit, "Debian package util-linux");
  constexpr int kFdLimit = 48;  // sluice idles at ~16 descriptors under ASan
  // No endpoint: nothing but the admin plane needs a descriptor meanwhile.
  TempFile cfg(make_config({}));
  // UBSan's vptr check, when its cache misses, tests the vtable's memory
  // through a pipe(2): at the descriptor limit that fails, and it reports a
  // bad vptr that is not there and ends the process (the build does not
  // recover, and a suppression cannot name a type it cannot read). So the
  // test runs where vptr checks are not compiled in: make tsan, make clang,
  // release builds.
  if (run_shell(std::string("grep -q __ubsan_handle_dynamic_type_cache_miss ") + SLUICE_BIN) == 0)
    GTEST_SKIP() << "sluice is built with UBSan's vptr check, which misreports at EMFILE";
  const std::string nofile = std::to_string(kFdLimit);
  std::string error;
  auto sluice = Process::start({prlimit, "--nofile=" + nofile + ":" + nofile, SLUICE_BIN,
                                "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"},
                               Process::Options{}, &error);
  ASSERT_TRUE(sluice) << error;
  ASSERT_NE(sluice->admin_port(), 0);

  // Idle connections to the admin port until sluice holds every descriptor
  // it may; the rest wait in the listen backlog.
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < kFdLimit + 16; ++i) {
    idle.push_back(std::make_unique<RawConnection>(kHost, sluice->admin_port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  ASSERT_TRUE(eventually([&] { return open_fds(sluice->pid()) >= kFdLimit; }, 10000ms))
      << open_fds(sluice->pid());

  // A spin would use the whole window (100 ticks a second); backing off
  // every 50 ms uses a small part of it. The bound is generous for ASan and
  // a loaded machine; it measures a spin, not a latency.
  const long hz = ::sysconf(_SC_CLK_TCK);
  const long before = cpu_ticks(sluice->pid());
  const auto window = 1000ms;
  const auto t0 = Clock::now();
  // A bounded wait that is the measurement itself, not synchronisation.
  std::this_thread::sleep_for(window);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const long used = cpu_ticks(sluice->pid()) - before;
  std::cout << "CPU at the descriptor limit: " << used << " ticks in " << elapsed << " s (" << hz
            << " Hz)\n";
  ASSERT_TRUE(sluice->running());
  EXPECT_LT(static_cast<double>(used), 0.3 * hz * elapsed);

  // Descriptors freed: the admin plane answers again.
  idle.clear();
  EXPECT_TRUE(eventually(
      [&] {
        HttpClient admin(kHost, sluice->admin_port(), 1000ms);
        return admin.request("GET", "/healthz").status == 200;
      },
      15000ms));
  EXPECT_EQ(sluice->stop(), 0);
}

// Nobody reads sluice's stderr (a stalled pipe: 64 KiB, then every write
// blocks). Log lines written on the thread that logs would stall it: here
// the admin thread, through a thousand invalid reloads that each log an
// error. With the log's own writer they wait in its buffer (past 1 MiB they
// would be dropped and counted: test/unit/observe/log_test.cc), every thread
// keeps serving, and once stderr is read again every line arrives.
TEST(EndpointFaults, StalledStderrNeverBlocksAThread) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  ASSERT_TRUE(mock);
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);  // never drained below
  ASSERT_TRUE(sluice);
  {
    const std::string tmp = cfg.path() + ".new";
    std::ofstream(tmp, std::ios::trunc) << make_config({mock->address()}) << "  bogusField: 1\n";
    ASSERT_EQ(std::rename(tmp.c_str(), cfg.path().c_str()), 0);
  }
  HttpClient admin(kHost, sluice->admin_port(), 5000ms);
  int refused = 0;
  for (int i = 0; i < 1000; ++i) refused += admin.request("POST", "/admin/v1/reload").status == 400;
  EXPECT_EQ(refused, 1000);
  HttpClient client(kHost, sluice->port(), 5000ms);
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), "sluice_log_lines_dropped_total"), 0);
  auto count = [&] {
    const std::string& text = sluice->stderr_now();
    int n = 0;
    for (std::size_t at = 0; (at = text.find("not applied", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_TRUE(eventually([&] { return count() == 1000; }, 10000ms)) << count();
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
