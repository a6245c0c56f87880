// data-parallel-profile-handler on the wire (issue 40, item 3): the
// scheduler picks a rank (an endpoint, port A), and sluice sends the
// request to the same host's primaryPort (port B) with
// `x-data-parallel-host-port: 127.0.0.1:A` — a completion and a stream
// alike; nothing reaches the rank's own port but sluice's /v1/models
// polls; a client's own copy of the header is never forwarded.
#include <string>
#include <vector>

#include "harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

// A completion, or (a body asking for a stream) two SSE events and [DONE].
FakeUpstream::Responder engine() {
  return [](const UpstreamRequest& r) {
    if (r.body.find("\"stream\":true") != std::string::npos) {
      const std::string events =
          "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
          "data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\n\n"
          "data: [DONE]\n\n";
      return FakeUpstream::Reply{
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Content-Length: " +
          std::to_string(events.size()) + "\r\n\r\n" + events};
    }
    return FakeUpstream::Reply{FakeUpstream::response(
        200, R"({"object":"chat.completion","choices":[{"message":{"content":"ok"}}],)"
             R"("usage":{"completion_tokens":1}})")};
  };
}

// The requests a client caused: sluice's own GET /v1/models polls left out.
std::vector<UpstreamRequest> inference(FakeUpstream& up) {
  std::vector<UpstreamRequest> out;
  for (auto& r : up.requests())
    if (r.head.rfind("GET /v1/models", 0) != 0) out.push_back(std::move(r));
  return out;
}

std::string dp_config(const FakeUpstream& rank, std::uint16_t primary_port) {
  return make_config({rank.address()}) +
         "plugins:\n"
         "- type: decode-filter\n"
         "- type: queue-scorer\n"
         "- type: max-score-picker\n"
         "- type: data-parallel-profile-handler\n"
         "  parameters:\n"
         "    primaryPort: " +
         std::to_string(primary_port) +
         "\n"
         "schedulingProfiles:\n"
         "- name: default\n"
         "  plugins:\n"
         "  - pluginRef: decode-filter\n"
         "  - pluginRef: max-score-picker\n"
         "  - pluginRef: queue-scorer\n";
}

const char* kChat =
    R"({"model":"mock-model","messages":[{"role":"user","content":"hello"}],"max_tokens":3})";
const char* kChatStream =
    R"({"model":"mock-model","messages":[{"role":"user","content":"again"}],"max_tokens":3,)"
    R"("stream":true})";

TEST(DataParallelProfileHandler, SendsToTheHostsPrimaryPortNamingTheRank) {
  FakeUpstream rank(engine());
  FakeUpstream primary(engine());
  ASSERT_TRUE(rank.ok() && primary.ok());
  TempFile cfg(dp_config(rank, primary.port()));
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body << "\n" << sluice->stderr_now();
  EXPECT_NE(r.body.find("chat.completion"), std::string::npos) << r.body;
  // Accounted to the rank: the endpoint that served it is the rank's.
  EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), rank.address());
  auto s = c.stream("/v1/chat/completions", kChatStream);
  ASSERT_TRUE(s.complete) << s.error;
  EXPECT_EQ(s.head.status, 200);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events.back().data, "[DONE]");

  const std::string rank_address = "127.0.0.1:" + std::to_string(rank.port());
  auto at_primary = inference(primary);
  ASSERT_EQ(at_primary.size(), 2u);
  for (const auto& q : at_primary) {
    EXPECT_EQ(q.head.rfind("POST /v1/chat/completions ", 0), 0u) << q.head;
    EXPECT_EQ(q.header("x-data-parallel-host-port"), rank_address) << q.head;
    EXPECT_EQ(q.header("host"), "127.0.0.1:" + std::to_string(primary.port())) << q.head;
  }
  EXPECT_NE(at_primary[1].body.find("\"stream\":true"), std::string::npos);
  EXPECT_TRUE(inference(rank).empty());
  EXPECT_TRUE(sluice->running());
  EXPECT_EQ(sluice->stop(), 0);
}

// A tenant must never choose the rank: its own header (any case, even
// twice) is dropped and the scheduler's rank goes in its place.
TEST(DataParallelProfileHandler, AClientsOwnRankHeaderIsNeverForwarded) {
  FakeUpstream rank(engine());
  FakeUpstream primary(engine());
  ASSERT_TRUE(rank.ok() && primary.ok());
  TempFile cfg(dp_config(rank, primary.port()));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  const Headers spoof = {{"x-data-parallel-host-port", "10.6.6.6:9999"},
                         {"X-Data-Parallel-Host-Port", "[fd00::66]:1"}};
  auto r = c.post_json("/v1/chat/completions", kChat, spoof);
  ASSERT_EQ(r.status, 200) << r.body;
  auto s = c.stream("/v1/chat/completions", kChatStream, spoof);
  ASSERT_TRUE(s.complete) << s.error;
  EXPECT_EQ(s.head.status, 200);

  auto at_primary = inference(primary);
  ASSERT_EQ(at_primary.size(), 2u);
  for (const auto& q : at_primary) {
    EXPECT_EQ(q.head.find("10.6.6.6"), std::string::npos) << q.head;
    EXPECT_EQ(q.head.find("fd00::66"), std::string::npos) << q.head;
    EXPECT_EQ(q.header("x-data-parallel-host-port"), "127.0.0.1:" + std::to_string(rank.port()))
        << q.head;
  }
  EXPECT_TRUE(inference(rank).empty());
  EXPECT_EQ(sluice->stop(), 0);
}

// primaryPort 0 (llm-d accepts it): sluice keeps the rank's own port, and
// the rank is still named.
TEST(DataParallelProfileHandler, PrimaryPortZeroSendsToTheRankItself) {
  FakeUpstream rank(engine());
  ASSERT_TRUE(rank.ok());
  TempFile cfg(dp_config(rank, 0));
  auto sluice = start_sluice(cfg);
  ASSERT_TRUE(sluice);
  HttpClient c(kHost, sluice->port());
  auto r = c.post_json("/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.body;
  auto at_rank = inference(rank);
  ASSERT_EQ(at_rank.size(), 1u);
  EXPECT_EQ(at_rank[0].header("x-data-parallel-host-port"),
            "127.0.0.1:" + std::to_string(rank.port()));
  EXPECT_EQ(sluice->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
