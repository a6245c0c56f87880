// The data plane end to end: real sluice in front of real sluice-mock
// processes on loopback.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "harness.h"

namespace sluice::test {
namespace {

using nlohmann::json;

const std::string kHost = "127.0.0.1";

TEST(Proxy, NonStreamingRoundTrip) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());

  auto res = client.post_json("/v1/completions", completion_body(5),
                              {{"x-request-id", "req-123"},
                               {"x-gateway-inference-fairness-id", "tenant-a"},
                               {"x-gateway-inference-objective", "batch"},
                               {"x-gateway-inference-ttl-ms", "1000"},
                               {"x-slo-ttft-ms", "200"}});
  ASSERT_EQ(res.status, 200) << res.error << res.body;
  auto body = json::parse(res.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_FALSE(body["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(res.header("x-gateway-destination-endpoint-served"), mock->address());
  EXPECT_EQ(res.header("x-request-id"), "req-123");
  // The control headers were removed before the request reached the mock.
  EXPECT_EQ(res.header("x-mock-control-headers-seen"), "0");

  auto chat = client.post_json(
      "/v1/chat/completions",
      R"({"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
  ASSERT_EQ(chat.status, 200) << chat.error;
  auto cb = json::parse(chat.body);
  EXPECT_EQ(cb["object"], "chat.completion");
  EXPECT_EQ(cb["usage"]["completion_tokens"], 3);
  EXPECT_EQ(chat.header("x-request-id").size(), 32u);  // generated

  auto models = client.request("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "mock-model");

  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, StreamCarriesUsageAndDone) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  auto r =
      client.stream("/v1/chat/completions",
                    R"({"model":"mock-model","messages":[{"role":"user","content":"hi"}],)"
                    R"("max_tokens":4,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r.complete) << r.error;
  EXPECT_EQ(r.head.status, 200);
  EXPECT_EQ(r.head.header("content-type"), "text/event-stream");
  EXPECT_EQ(r.head.header("x-gateway-destination-endpoint-served"), mock->address());
  ASSERT_EQ(r.events.size(), 6u);  // 4 tokens, usage, [DONE]
  EXPECT_EQ(json::parse(r.events[4].data)["usage"]["completion_tokens"], 4);
  EXPECT_EQ(r.events[5].data, "[DONE]");
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, KeepAliveIsReusedOnBothSides) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 20; ++i) {
    if (i % 3 == 0) {
      auto r = client.stream("/v1/completions", completion_body(3, true));
      ASSERT_TRUE(r.complete) << r.error;
    } else {
      auto r = client.post_json("/v1/completions", completion_body(3));
      ASSERT_EQ(r.status, 200) << r.error;
    }
  }
  EXPECT_EQ(client.connections_opened(), 1);
  // One connection from sluice for all 20 requests, one kept by sluice's
  // metrics scraper, and this scrape's own.
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_connections_accepted_total"), 3);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 20);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// Every bad input gets its status and reason, the connection stays usable
// where it can, and nothing reaches the model server.
TEST(Proxy, BadInputsAreAnsweredAndNothingLeaks) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile cfg(make_config({mock->address()}, "  maxBodyBytes: 4Ki\n  maxHeaderBytes: 2Ki\n"));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());

  auto expect_error = [](const Response& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.error << " " << r.body;
    if (r.status == 0) return;
    auto b = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(b.is_discarded()) << r.body;
    EXPECT_EQ(b["error"]["code"], code);
    EXPECT_TRUE(b["error"]["message"].is_string());
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  };
  expect_error(client.post_json("/v1/completions", R"({"model":"m","prompt":)"), 400,
               "invalid-json");
  expect_error(client.post_json("/v1/chat/completions", R"({"messages":[]})"), 400,
               "missing-model");
  expect_error(client.request("POST", "/v1/completions", completion_body(1),
                              {{"Content-Type", "text/plain"}}),
               400, "unsupported-content-type");
  auto get = client.request("GET", "/v1/completions");
  expect_error(get, 405, "method-not-allowed");
  EXPECT_EQ(get.header("allow"), "POST");
  expect_error(client.request("POST", "/v1/models", "{}"), 405, "method-not-allowed");
  expect_error(client.request("GET", "/v2/unknown"), 404, "not-found");
  // All of the above kept the connection open.
  EXPECT_EQ(client.connections_opened(), 1);

  std::string big = completion_body(1, false, std::string(5000, 'a'));
  auto too_big = client.post_json("/v1/completions", big);
  expect_error(too_big, 413, "body-too-large");
  EXPECT_EQ(too_big.header("connection"), "close");

  HttpClient c2(kHost, sluice->port());
  auto huge_header =
      c2.post_json("/v1/completions", completion_body(1), {{"x-padding", std::string(3000, 'h')}});
  expect_error(huge_header, 431, "headers-too-large");

  // A chunked body over the limit is caught while it streams in.
  RawConnection raw(kHost, sluice->port());
  std::string chunk(5000, 'x');
  char len[16];
  std::snprintf(len, sizeof len, "%zx", chunk.size());
  raw.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      std::string(len) + "\r\n" + chunk + "\r\n0\r\n\r\n");
  bool closed = false;
  auto raw_answer = raw.read_until_close(5000ms, &closed);
  EXPECT_EQ(raw_answer.rfind("HTTP/1.1 413", 0), 0u) << raw_answer;
  EXPECT_NE(raw_answer.find("body-too-large"), std::string::npos);
  EXPECT_TRUE(closed);

  // The daemon keeps serving, and none of the bad requests reached the mock.
  HttpClient c3(kHost, sluice->port());
  auto ok = c3.post_json("/v1/completions", completion_body(2));
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_EQ(scrape_metric(kHost, mock->port(), "mock_requests_total"), 1);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, SlowHeadersAreClosedAtTheHeaderTimeout) {
  auto mock = start_mock();
  TempFile cfg(make_config({mock->address()}, "  headerReadTimeout: 300ms\n"));
  auto sluice = start_sluice(cfg);
  RawConnection raw(kHost, sluice->port());
  auto start = Clock::now();
  ASSERT_TRUE(raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));  // and nothing more
  bool closed = false;
  auto got = raw.read_until_close(10000ms, &closed);
  auto waited = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_TRUE(closed);
  EXPECT_TRUE(got.empty()) << got;
  EXPECT_GE(waited, 250);
  // Others are still served.
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, IdleKeepAliveConnectionIsClosedAtItsTimeout) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  TempFile cfg(make_config({mock->address()}, "  keepAliveIdleTimeout: 300ms\n"));
  auto sluice = start_sluice(cfg);
  RawConnection raw(kHost, sluice->port());
  std::string body = completion_body(1);
  ASSERT_TRUE(
      raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body));
  auto start = Clock::now();
  bool closed = false;
  auto got = raw.read_until_close(10000ms, &closed);
  auto waited = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_TRUE(closed);
  EXPECT_GE(waited, 250);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, SilentEndpointTimesOut) {
  // One token per 2 s, but sluice allows 300 ms of upstream silence.
  auto mock = start_mock({"--decode-ms-per-token", "2000"});
  TempFile cfg(make_config({mock->address()}, "  upstreamIdleTimeout: 300ms\n"));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  auto r = client.post_json("/v1/completions", completion_body(3));
  EXPECT_EQ(r.status, 504) << r.error << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "upstream-timeout");
  // Streaming: the headers arrive at once, then the silence between chunks
  // ends the stream with an error event.
  HttpClient c2(kHost, sluice->port());
  auto start = Clock::now();
  auto s = c2.stream("/v1/completions", completion_body(3, true));
  auto waited = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_EQ(s.head.status, 200);
  EXPECT_FALSE(s.complete);
  // The error event alone: the stream ended before the first token came.
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_EQ(json::parse(s.events.back().data)["error"]["code"], "upstream-error");
  EXPECT_GE(waited, 250);  // at the idle timeout, not before
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

namespace {
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
}  // namespace

// A client that does not read must slow the upstream read, not fill sluice's
// memory: the endpoint produces ~15 MB of SSE as fast as it can while the
// client reads nothing; sluice's resident memory must not follow.
TEST(Proxy, SlowClientBackpressuresInsteadOfBuffering) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  TempFile cfg(make_config({mock->address()}, "  clientWriteTimeout: 60s\n"));
  auto sluice = start_sluice(cfg);
  const int kTokens = 100000;
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  // One request first: what the first request makes once (the dispatcher's
  // huge pages, lazily built tables, a thread's first buffers) is not what
  // this test bounds.
  {
    HttpClient warm(kHost, sluice->port());
    ASSERT_EQ(warm.post_json("/v1/completions", completion_body(4, true)).status, 200);
  }
  long before = rss_kib(sluice->pid());
  RawConnection raw(kHost, sluice->port());
  std::string body = completion_body(kTokens, true);
  ASSERT_TRUE(
      raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body));
  // Generation finishes on the mock (its own queue holds the output); sluice
  // holds at most its read buffer plus what the socket buffers take.
  ASSERT_TRUE(eventually(
      [&] {
        return scrape_metric(kHost, mock->port(), running) == 0 &&
               scrape_metric(kHost, mock->port(), "mock_requests_total") == 2;
      },
      30000ms));
  long during = rss_kib(sluice->pid());
  std::printf("sluice RSS: %ld KiB before, %ld KiB with ~15 MB pending for a stalled client\n",
              before, during);
  // TSan's shadow memory and deferred frees make RSS meaningless in that
  // build (seen: +80 MB there, +2 MB in the ASan and release builds); the
  // bound is checked in the others.
#if !defined(__SANITIZE_THREAD__)
  EXPECT_LT(during - before, 8 * 1024);
#endif
  // Everything still arrives, in order, once the client reads: up to the
  // final chunk after [DONE].
  bool closed = false;
  std::string all;
  auto deadline = Clock::now() + 30s;
  auto finished = [&] {
    return all.size() > 64 && all.ends_with("0\r\n\r\n") &&
           all.find("data: [DONE]", all.size() - 64) != std::string::npos;
  };
  while (!closed && !finished() && Clock::now() < deadline)
    all += raw.read_until_close(100ms, &closed);
  EXPECT_TRUE(finished());
  // De-chunk (sluice re-frames at its own read boundaries, which may split
  // an event across chunks), checking the framing on the way.
  std::string body_text;
  std::size_t pos = all.find("\r\n\r\n");
  ASSERT_NE(pos, std::string::npos);
  pos += 4;
  while (true) {
    auto eol = all.find("\r\n", pos);
    ASSERT_NE(eol, std::string::npos);
    std::size_t size = std::stoul(all.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) break;
    ASSERT_LE(eol + 2 + size + 2, all.size());
    body_text.append(all, eol + 2, size);
    ASSERT_EQ(all.compare(eol + 2 + size, 2, "\r\n"), 0);
    pos = eol + 2 + size + 2;
  }
  std::size_t events = 0;
  for (std::size_t at = 0; (at = body_text.find("data: ", at)) != std::string::npos; at += 6)
    ++events;
  EXPECT_EQ(events, static_cast<std::size_t>(kTokens + 1));
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// GIE's legacy admission (flow control off): a sheddable request is served
// while the pool has room and rejected 429 while it is saturated (here: the
// mock's KV cache over the 0.8 threshold); other requests are never shed.
TEST(Proxy, LegacyAdmissionShedsSheddableRequestsWhileSaturated) {
  // Two sequences at a time: a probe forwarded before the next scrape runs
  // next to the long request instead of waiting behind it.
  auto mock = start_mock(
      {"--decode-ms-per-token", "5", "--max-running", "2", "--kv-capacity-tokens", "1100"});
  TempFile cfg(make_config({mock->address()}) +
               "objectives:\n  - {name: best-effort, priority: -10}\n");
  auto sluice = start_sluice(cfg);
  const Headers shed = {{"x-gateway-inference-objective", "best-effort"}};
  HttpClient client(kHost, sluice->port());
  // Served once the first scrape shows room (before it, metrics are missing,
  // which counts as saturated).
  EXPECT_TRUE(eventually(
      [&] { return client.post_json("/v1/completions", completion_body(1), shed).status == 200; }));
  // Saturate: a long request with a ~1000-token prompt, straight to the mock.
  Response long_one;
  std::thread t([&] {
    HttpClient direct(kHost, mock->port(), 30000ms);
    long_one =
        direct.post_json("/v1/completions", completion_body(300, false, std::string(4000, 'k')));
  });
  const std::string kv = "vllm:kv_cache_usage_perc{model_name=\"mock-model\"}";
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), kv) >= 0.8; }));
  Response shed_answer;
  EXPECT_TRUE(eventually([&] {
    shed_answer = client.post_json("/v1/completions", completion_body(1), shed);
    return shed_answer.status == 429;
  }));
  EXPECT_EQ(shed_answer.header("x-gateway-inference-dropped-reason"), "rejected-capacity");
  EXPECT_EQ(json::parse(shed_answer.body)["error"]["message"],
            "system saturated, sheddable request dropped");
  // A request of priority 0 is not shed: it is forwarded (and waits at the mock).
  auto normal = client.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(normal.status, 200);
  t.join();
  EXPECT_EQ(long_one.status, 200);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, RefusingEndpointIsSkipped) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  ClosedPort refusing;  // held until the test ends
  std::string dead = refusing.address();
  TempFile cfg(make_config({dead, mock->address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 10; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200) << r.error << r.body;
    EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), mock->address());
  }
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, NoUsableEndpointIs503WithReason) {
  ClosedPort refusing;  // held until the test ends
  std::string dead = refusing.address();
  TempFile cfg(make_config({dead}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  for (int i = 0; i < 3; ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 503) << r.error;
    EXPECT_EQ(r.header("x-gateway-inference-dropped-reason"), "rejected-no-endpoints");
    EXPECT_EQ(r.header("retry-after"), "1");
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "rejected-no-endpoints");
  }
  EXPECT_EQ(client.connections_opened(), 1);
  EXPECT_EQ(sluice->stop(), 0);
}

TEST(Proxy, EndpointDyingMidStreamEndsTheClientStreamWithAnError) {
  auto a = start_mock({"--decode-ms-per-token", "10"});
  auto b = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(make_config({a->address(), b->address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  std::string victim;
  int events = 0;
  auto r = client.stream("/v1/completions", completion_body(500, true), {},
                         [&](const Response& head, const SseEvent&) {
                           if (++events == 3) {
                             victim = head.header("x-gateway-destination-endpoint-served");
                             (victim == a->address() ? a : b)->stop(SIGKILL);
                           }
                           return true;
                         });
  ASSERT_FALSE(victim.empty());
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.error.empty());
  ASSERT_GE(r.events.size(), 4u);
  EXPECT_LT(r.events.size(), 500u);
  // The last event tells an SSE client why the stream ended.
  auto last = json::parse(r.events.back().data, nullptr, false);
  ASSERT_FALSE(last.is_discarded()) << r.events.back().data;
  EXPECT_EQ(last["error"]["code"], "upstream-error");

  // The survivor serves everything that follows; nothing reuses a dead connection.
  auto& survivor = victim == a->address() ? b : a;
  HttpClient after(kHost, sluice->port());
  for (int i = 0; i < 6; ++i) {
    auto ok = after.post_json("/v1/completions", completion_body(2));
    ASSERT_EQ(ok.status, 200) << ok.error << ok.body;
    EXPECT_EQ(ok.header("x-gateway-destination-endpoint-served"), survivor->address());
  }
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(survivor->stop(), 0);
}

TEST(Proxy, ClientLeavingMidStreamStopsGeneration) {
  // 1000 tokens at 10 ms: ten seconds of generation if nobody stops it.
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  {
    HttpClient client(kHost, sluice->port());
    int events = 0;
    auto r = client.stream("/v1/completions", completion_body(1000, true), {},
                           [&](const Response&, const SseEvent&) { return ++events < 3; });
    EXPECT_FALSE(r.complete);
    EXPECT_EQ(events, 3);
  }
  auto left_at = Clock::now();
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 0; }, 3000ms));
  auto stopped_after = std::chrono::duration<double, std::milli>(Clock::now() - left_at).count();
  std::printf("generation stopped %.1f ms after the client left\n", stopped_after);
  // sluice keeps working, and its pooled connection count did not leak: the
  // next request opens a fresh upstream connection (the old one was closed).
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(scrape_metric(kHost, mock->port(), running), 0);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

// A non-streaming answer writes nothing to the client until it is done, so
// only the client watch notices the client leaving. The watch is armed 10
// to 20 ms after admission (proxy/deferred_watch.h): a client leaving
// mid-generation, or right after sending (its request dispatched before any
// watch was armed), still stops the generation, within the 3 s bound of the
// streaming test above rather than at the answer's end (10 s).
TEST(Proxy, ClientLeavingANonStreamingRequestStopsGeneration) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string body = completion_body(1000);
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const std::string closed = "sluice_requests_total{outcome=\"client-closed\"}";
  int left = 0;
  for (const bool wait_for_generation : {true, false}) {
    {
      RawConnection raw(kHost, sluice->port());
      ASSERT_TRUE(raw.send(request));
      if (wait_for_generation) {
        ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
      }
    }  // the client leaves here
    ++left;
    const char* how = wait_for_generation ? "left mid-generation" : "left right after sending";
    // sluice closed the request (and with it the upstream connection)...
    EXPECT_TRUE(eventually(
        [&] { return scrape_metric(kHost, sluice->admin_port(), closed) == left; }, 3000ms))
        << how;
    // ...and the engine stopped generating.
    EXPECT_TRUE(
        eventually([&] { return scrape_metric(kHost, mock->port(), running) == 0; }, 3000ms))
        << how;
  }
  // Nothing else was lost: the next request is answered.
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Proxy, StalePooledConnectionIsRetriedOnceOnAFreshOne) {
  auto mock = start_mock({"--decode-ms-per-token", "1"});
  const std::string address = mock->address();
  TempFile cfg(make_config({address}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  ASSERT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  // The endpoint restarts on the same port: sluice's pooled connection is now
  // dead, which it can only find out by using it.
  EXPECT_EQ(mock->stop(), 0);
  auto again = start_mock({"--decode-ms-per-token", "1", "--listen", address});
  ASSERT_TRUE(again);
  ASSERT_EQ(again->address(), address);
  auto r = client.post_json("/v1/completions", completion_body(1));
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(scrape_metric(kHost, again->port(), "mock_requests_total"), 1);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(again->stop(), 0);
}

// Several I/O threads, concurrent clients, two endpoints: every request is
// answered once, load spreads over both endpoints, and shutdown is clean.
// (This is the test `make tsan` leans on.)
TEST(Proxy, ConcurrentClientsAcrossIoThreads) {
  auto a = start_mock({"--decode-ms-per-token", "1", "--max-running", "64"});
  auto b = start_mock({"--decode-ms-per-token", "1", "--max-running", "64"});
  TempFile cfg(make_config({a->address(), b->address()}));
  auto sluice = start_sluice(cfg, {"--threads", "3"});
  constexpr int kClients = 8, kRequests = 25;
  std::atomic<int> ok{0}, served_a{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client(kHost, sluice->port());
      for (int i = 0; i < kRequests; ++i) {
        std::string served;
        if ((c + i) % 2 == 0) {
          auto r = client.stream("/v1/completions", completion_body(4, true));
          if (r.complete && r.head.status == 200 && r.events.size() == 5) ++ok;
          served = r.head.header("x-gateway-destination-endpoint-served");
        } else {
          auto r = client.post_json("/v1/completions", completion_body(4));
          if (r.status == 200) ++ok;
          served = r.header("x-gateway-destination-endpoint-served");
        }
        if (served == a->address()) ++served_a;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  EXPECT_EQ(scrape_metric(kHost, a->port(), "mock_requests_total") +
                scrape_metric(kHost, b->port(), "mock_requests_total"),
            kClients * kRequests);
  EXPECT_GT(served_a.load(), kClients * kRequests / 5);
  EXPECT_LT(served_a.load(), kClients * kRequests * 4 / 5);
  EXPECT_EQ(sluice->stop(), 0);
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

TEST(Proxy, GracefulShutdownFinishesInFlightRequests) {
  auto mock = start_mock({"--decode-ms-per-token", "10"});
  TempFile cfg(make_config({mock->address()}));
  auto sluice = start_sluice(cfg);
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  Response in_flight;
  std::thread t([&] {
    HttpClient client(kHost, sluice->port());
    in_flight = client.post_json("/v1/completions", completion_body(60));  // ~600 ms
  });
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
  kill(sluice->pid(), SIGTERM);
  // New connections are refused once shutdown has begun...
  EXPECT_TRUE(eventually([&] {
    HttpClient probe(kHost, sluice->port(), 1000ms);
    return probe.request("GET", "/v1/models").status == 0;
  }));
  t.join();
  // ...while the request in flight completes normally.
  EXPECT_EQ(in_flight.status, 200) << in_flight.error;
  EXPECT_EQ(json::parse(in_flight.body)["usage"]["completion_tokens"], 60);
  EXPECT_EQ(sluice->wait(10000ms), 0);
  EXPECT_EQ(mock->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
