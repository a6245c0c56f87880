// Streaming through sluice: each SSE event reaches the client as soon as the
// model server produced it, checked by causality rather than by the clock.
// (The milliseconds it adds per event are a benchmark's number, measured
// against HAProxy and nginx: bench/streams.sh.)
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

const std::string kHost = "127.0.0.1";

std::string chunk(const std::string& bytes) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

// The engine produces event k+1 only once the client has received event k
// (lockstep). A proxy that held any event back (batching, buffering until a
// size or a timer, waiting for the response to end) would leave the engine
// waiting for a client that waits for it: the bounded wait below fails
// instead of the stream completing. Chunk boundaries are not event
// boundaries here, so relaying whole events (protocol/sse_events.h) must not
// hold one either: an event is sent as its first half, then (a separate
// write) its second half with the next event's first half.
TEST(StreamingTiming, EventsArriveAsTheyAreProduced) {
  constexpr int kEvents = 20;
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  bool gave_up = false;
  FakeUpstream up([&](const UpstreamRequest&) {
    FakeUpstream::Reply reply;
    reply.bytes =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "\r\n" +
        chunk("data: {\"n\":0,");
    auto step = std::make_shared<int>(0);
    reply.next = [&, step](std::string& part) {
      const int k = (*step)++;
      if (k == kEvents) return false;
      if (k > 0) {
        // Produced only once the client holds event k-1.
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return received >= k; })) {
          gave_up = true;
          return false;
        }
      }
      // The rest of event k, and the start of event k+1 (or the end).
      part =
          chunk("\"end\":true}\n\n" +
                (k + 1 < kEvents ? "data: {\"n\":" + std::to_string(k + 1) + "," : std::string()));
      if (k + 1 == kEvents) part += "0\r\n\r\n";
      return true;
    };
    return reply;
  });
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port(), 30000ms);
  auto s = client.stream("/v1/completions", completion_body(kEvents, true), {},
                         [&](const Response&, const SseEvent&) {
                           std::lock_guard<std::mutex> lock(mu);
                           received += 1;
                           cv.notify_all();
                           return true;
                         });
  EXPECT_FALSE(gave_up) << "an event was held back: the engine waited for the client";
  ASSERT_TRUE(s.complete) << s.error;
  ASSERT_EQ(s.events.size(), static_cast<std::size_t>(kEvents));
  for (int k = 0; k < kEvents; ++k)
    EXPECT_EQ(s.events[static_cast<std::size_t>(k)].data,
              "{\"n\":" + std::to_string(k) + ",\"end\":true}");
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
