// The hostile-input suite, on the wire: request smuggling shapes, pipelining,
// a client that never reads its stream, endpoints that lie about lengths,
// reset or send garbage. Each test sends the bad bytes, checks the status and
// the reason, that sluice keeps serving, and that nothing else was lost (no
// smuggled request reached an endpoint, every request is accounted for).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "flow_control_harness.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

FakeUpstream::Reply echo(const UpstreamRequest& r) {
  return FakeUpstream::Reply{FakeUpstream::response(200, json{{"echo", r.body}}.dump())};
}

std::string post(const std::string& body, const std::string& framing) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         framing + "\r\n" + body;
}

double outcome_count(std::uint16_t admin_port, const std::string& outcome) {
  const double v =
      scrape_metric(kHost, admin_port, "sluice_requests_total{outcome=\"" + outcome + "\"}");
  return v < 0 ? 0 : v;
}

// Each shape is a request whose length two parsers could read differently,
// followed by a second request hidden in what the first one's body would be
// under the other reading. sluice must refuse the first and close: the
// hidden one never reaches an endpoint.
TEST(HostileWire, SmugglingShapesAreRefusedAndWhatHidesBehindThemNeverRuns) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  const std::string hidden = post(
      completion_body(1, false, "SMUGGLED"),
      "Content-Length: " + std::to_string(completion_body(1, false, "SMUGGLED").size()) + "\r\n");
  const std::string body = completion_body(1, false, "first");
  const std::string n = std::to_string(body.size());
  struct Shape {
    const char* name;
    std::string bytes;
  };
  const std::vector<Shape> shapes = {
      {"CL and TE",
       post("0\r\n\r\n" + hidden, "Content-Length: " + std::to_string(5 + hidden.size()) +
                                      "\r\nTransfer-Encoding: chunked\r\n")},
      {"TE and CL", post("0\r\n\r\n" + hidden, "Transfer-Encoding: chunked\r\nContent-Length: " +
                                                   std::to_string(5 + hidden.size()) + "\r\n")},
      {"two different CLs",
       post(body + hidden, "Content-Length: " + n + "\r\nContent-Length: " +
                               std::to_string(body.size() + hidden.size()) + "\r\n")},
      {"CL list", post(body + hidden, "Content-Length: " + n + ", " +
                                          std::to_string(body.size() + hidden.size()) + "\r\n")},
      // Listed or repeated, even equal: docs/security.md says refused (issue 39, item 5).
      {"CL list of equal lengths", post(body + hidden, "Content-Length: " + n + ", " + n + "\r\n")},
      {"CL list without a space", post(body + hidden, "Content-Length: " + n + "," + n + "\r\n")},
      {"two equal CLs",
       post(body + hidden, "Content-Length: " + n + "\r\nContent-Length: " + n + "\r\n")},
      {"signed CL", post(body + hidden, "Content-Length: +" + n + "\r\n")},
      {"TE obs-fold",
       post("0\r\n\r\n" + hidden, "Transfer-Encoding:\r\n chunked\r\nContent-Length: " +
                                      std::to_string(5 + hidden.size()) + "\r\n")},
      {"TE xchunked", post("0\r\n\r\n" + hidden, "Transfer-Encoding: xchunked\r\n")},
      {"TE chunked twice", post("0\r\n\r\n" + hidden, "Transfer-Encoding: chunked, chunked\r\n")},
      {"space before colon", post("0\r\n\r\n" + hidden, "Transfer-Encoding : chunked\r\n")},
      {"bare LF",
       "POST /v1/completions HTTP/1.1\nHost: x\nContent-Length: " + n + "\n\n" + body + hidden},
      {"chunk size overflow",
       post("10000000000000000\r\n" + hidden, "Transfer-Encoding: chunked\r\n")},
  };
  int refused = 0;
  for (const auto& s : shapes) {
    SCOPED_TRACE(s.name);
    RawConnection raw(kHost, sluice->port());
    ASSERT_TRUE(raw.send(s.bytes));
    bool closed = false;
    const std::string text = raw.read_until_close(5000ms, &closed);
    const int status = text.size() > 12 ? std::atoi(text.substr(9, 3).c_str()) : 0;
    const bool typed = status == 400 || status == 501;
    const bool one_answer = text.find("HTTP/1.1", 1) == std::string::npos;
    EXPECT_TRUE(typed) << text.substr(0, 300);
    EXPECT_TRUE(closed);
    EXPECT_TRUE(one_answer) << text;  // only one answer on the connection
    refused += typed && closed && one_answer;
  }
  for (const auto& r : up.requests()) EXPECT_EQ(r.body.find("SMUGGLED"), std::string::npos);
  EXPECT_TRUE(up.requests().empty());
  EXPECT_EQ(refused, static_cast<int>(shapes.size()));
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
  // sluice's own accounting agrees: each shape one refused request, and the
  // one served.
  EXPECT_TRUE(eventually([&] {
    return outcome_count(sluice->admin_port(), "bad-request") +
                   outcome_count(sluice->admin_port(), "unsupported-transfer-coding") ==
               static_cast<double>(shapes.size()) &&
           outcome_count(sluice->admin_port(), "served") == 1;
  }));
}

// Pipelined requests (all in one write) are answered one by one, in order,
// each with its own answer.
TEST(HostileWire, PipelinedRequestsAreAnsweredInOrder) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  std::string burst;
  for (int i = 0; i < 5; ++i) {
    const std::string b = completion_body(1, false, "pipelined-" + std::to_string(i));
    burst += post(b, "Content-Length: " + std::to_string(b.size()) + "\r\n");
  }
  burst += "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  RawConnection raw(kHost, sluice->port());
  ASSERT_TRUE(raw.send(burst));
  bool closed = false;
  std::string text;
  for (int tries = 0; tries < 50 && !closed; ++tries) text += raw.read_until_close(200ms, &closed);
  std::size_t at = 0;
  for (int i = 0; i < 5; ++i) {
    at = text.find("HTTP/1.1 200 ", at);
    ASSERT_NE(at, std::string::npos) << i << text;
    const auto mine = text.find("pipelined-" + std::to_string(i), at);
    const auto next = text.find("HTTP/1.1 ", at + 1);
    ASSERT_NE(mine, std::string::npos);
    EXPECT_LT(mine, next) << "answer " << i << " is not the " << i << "th response";
    at = next;
  }
  EXPECT_NE(at, std::string::npos);  // and the sixth (the models list)
  EXPECT_TRUE(closed);
  EXPECT_EQ(up.requests().size(), 6u);
}

// Bodies of hundreds of KB are read in large reads once their length is
// known, and the read buffer grown for them is given back between requests:
// large and small requests pipelined in one write each reach the endpoint
// byte for byte, in order, and each gets its own answer.
TEST(HostileWire, LargeAndSmallBodiesPipelinedReachTheEndpointIntact) {
  FakeUpstream up([](const UpstreamRequest& r) {
    return FakeUpstream::Reply{FakeUpstream::response(200, json{{"bytes", r.body.size()}}.dump())};
  });
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  const std::size_t sizes[] = {300 * 1024, 10, 700 * 1024, 3, 9000};
  std::vector<std::string> bodies;
  std::string burst;
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    std::string prompt(sizes[i], static_cast<char>('a' + i));
    prompt += "-" + std::to_string(i);
    bodies.push_back(completion_body(1, false, prompt));
    const bool last = i + 1 == std::size(sizes);
    burst += post(bodies.back(), "Content-Length: " + std::to_string(bodies.back().size()) +
                                     "\r\n" + (last ? "Connection: close\r\n" : ""));
  }
  RawConnection raw(kHost, sluice->port());
  ASSERT_TRUE(raw.send(burst));
  bool closed = false;
  std::string text;
  for (int tries = 0; tries < 50 && !closed; ++tries) text += raw.read_until_close(200ms, &closed);
  EXPECT_TRUE(closed);
  std::size_t at = 0;
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    at = text.find("HTTP/1.1 200 ", at);
    ASSERT_NE(at, std::string::npos) << i << text.substr(0, 500);
    at += 1;
  }
  const auto got = up.requests();
  ASSERT_EQ(got.size(), bodies.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(got[i].body.size(), bodies[i].size()) << i;
    EXPECT_TRUE(got[i].body == bodies[i]) << "body " << i << " differs";
  }
}

// A client that asks for a long stream and never reads it: sluice stops at
// clientWriteTimeout, closes the client and the upstream (the engine stops
// generating), and keeps serving others.
TEST(HostileWire, ClientThatNeverReadsItsStreamIsCutAtTheWriteTimeout) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  TempFile cfg(make_config({mock->address()}, "  clientWriteTimeout: 1s\n"));
  auto sluice = start_sluice(cfg);
  RawConnection stalled(kHost, sluice->port());
  const std::string body = completion_body(1000000, true);
  ASSERT_TRUE(stalled.send(post(body, "Content-Length: " + std::to_string(body.size()) + "\r\n")));
  // sluice holds the connection while the client's buffers fill, then cuts
  // it: both its connections to the client and to the mock close.
  ASSERT_TRUE(eventually(
      [&] {
        return scrape_metric(kHost, sluice->admin_port(),
                             "sluice_connections{listener=\"data\"}") == 1;
      },
      5000ms));
  EXPECT_TRUE(eventually(
      [&] {
        return scrape_metric(kHost, sluice->admin_port(),
                             "sluice_connections{listener=\"data\"}") == 0 &&
               scrape_metric(kHost, mock->port(),
                             "vllm:num_requests_running{model_name=\"mock-model\"}") == 0;
      },
      15000ms));
  EXPECT_EQ(scrape_metric(kHost, sluice->admin_port(), "sluice_endpoint_in_flight"), 0);
  HttpClient client(kHost, sluice->port());
  EXPECT_EQ(client.post_json("/v1/completions", completion_body(1)).status, 200);
}

// Endpoints that lie about the length, reset, or answer garbage: each such
// request ends with a typed error for its own client, the connection is
// never reused, and the next client gets its own, whole answer.
TEST(HostileWire, EndpointsThatLieResetOrSendGarbageHurtOnlyTheirOwnRequest) {
  std::atomic<int> n{0};
  FakeUpstream up([&](const UpstreamRequest& r) {
    switch (n++ % 5) {
      case 0:  // garbage instead of a response
        return FakeUpstream::Reply{"NOT HTTP AT ALL\r\n\r\n", true};
      case 1:  // a reset: closes without a byte
        return FakeUpstream::Reply{"", true};
      case 2:  // promises 100000 bytes, sends a few, closes
        return FakeUpstream::Reply{
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            "{\"partial\":",
            true};
      case 3:  // a negative length
        return FakeUpstream::Reply{"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}", true};
      default:
        return echo(r);
    }
  });
  TempFile cfg(make_config({up.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg);
  int errors = 0, served = 0, cut = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      HttpClient client(kHost, sluice->port());
      const std::string prompt = "round " + std::to_string(round) + " request " + std::to_string(i);
      auto r = client.post_json("/v1/completions", completion_body(1, false, prompt));
      SCOPED_TRACE(prompt);
      // Counted by what came back, not by which lie was told.
      const bool was_cut = r.status == 0 && r.body.find(prompt) == std::string::npos;
      const bool was_served = r.status == 200 && r.body.find(prompt) != std::string::npos;
      const bool was_error = r.status == 502 && json::accept(r.body) &&
                             json::parse(r.body)["error"]["code"] == "upstream-error";
      cut += was_cut;
      served += was_served;
      errors += was_error;
      if (i == 2) {
        // The head was relayed before the lie showed: the transfer is cut.
        EXPECT_TRUE(was_cut) << r.status << " " << r.body;
      } else if (i == 4) {
        EXPECT_TRUE(was_served) << r.status << " " << r.body;
      } else {
        EXPECT_TRUE(was_error) << r.status << " " << r.body;
      }
    }
  }
  EXPECT_EQ(served, 3);
  EXPECT_EQ(errors, 9);
  EXPECT_EQ(cut, 3);
  // Every request accounted for: 15 sent, 15 reached the endpoint (none was
  // retried onto a stale connection), outcomes add up.
  EXPECT_EQ(up.requests().size(), 15u);
  EXPECT_TRUE(eventually([&] {
    return outcome_count(sluice->admin_port(), "served") == 3 &&
           outcome_count(sluice->admin_port(), "upstream-error") == 12;
  }));
  EXPECT_TRUE(sluice->running());
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// llm-d's header names and the deprecated x-gateway-* / x-slo-* aliases:
// both steer, the x-llm-d-* name wins whatever the order, and neither
// reaches the endpoint.
TEST(HeaderAliases, LlmdNamesWinOverTheirAliasesAndNeitherIsForwarded) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}) +
               "objectives:\n  - {name: premium, priority: 10}\n  - {name: batch, priority: 3}\n");
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  struct Case {
    Headers headers;
    std::string flow;
    int priority;
  };
  const std::vector<Case> cases = {
      {{{"x-llm-d-inference-fairness-id", "new-only"}}, "new-only", 0},
      {{{"x-gateway-inference-fairness-id", "old-only"}}, "old-only", 0},
      {{{"x-gateway-inference-fairness-id", "old-first"},
        {"x-llm-d-inference-fairness-id", "new-second"}},
       "new-second",
       0},
      {{{"x-llm-d-inference-fairness-id", "new-first"},
        {"x-gateway-inference-fairness-id", "old-second"}},
       "new-first",
       0},
      {{{"x-llm-d-inference-fairness-id", "obj"},
        {"x-gateway-inference-objective", "batch"},
        {"x-llm-d-inference-objective", "premium"}},
       "obj",
       10},
      {{{"x-llm-d-inference-fairness-id", "obj-old"}, {"x-gateway-inference-objective", "batch"}},
       "obj-old",
       3},
  };
  for (const auto& c : cases) {
    auto r = client.post_json("/v1/completions", completion_body(1), c.headers);
    EXPECT_EQ(r.status, 200) << c.flow << ": " << r.body;
  }
  // A bad value under the llm-d name is refused like one under the alias.
  auto bad = client.post_json("/v1/completions", completion_body(1),
                              {{"x-llm-d-inference-fairness-id", "a b"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["code"], "invalid-fairness-id");

  HttpClient admin(kHost, sluice->admin_port());
  auto flows = json::parse(admin.request("GET", "/admin/v1/flows").body);
  std::map<std::string, int> seen;
  for (const auto& f : flows) seen[f["id"].get<std::string>()] = f["priority"].get<int>();
  EXPECT_EQ(seen.size(), cases.size());
  for (const auto& c : cases) {
    ASSERT_EQ(seen.count(c.flow), 1u) << c.flow;
    EXPECT_EQ(seen[c.flow], c.priority) << c.flow;
  }
  for (const auto& r : up.requests()) {
    for (const char* h : {"x-llm-d-inference-fairness-id", "x-gateway-inference-fairness-id",
                          "x-llm-d-inference-objective", "x-gateway-inference-objective"})
      EXPECT_EQ(r.header(h), "") << h;
  }
  EXPECT_EQ(up.requests().size(), cases.size());
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// A stream that ends early must leave its client only events that parse:
// the part of an event that came before the end is never relayed, so the
// error event is not glued to it (issue 33, defect 1).
const char kSseHead[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(const std::string& bytes) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

// Every event parses as JSON; returns the last one's error code ("" if none).
std::string check_events(const StreamResult& s) {
  for (const auto& e : s.events)
    EXPECT_TRUE(json::accept(e.data)) << "an event that does not parse: " << e.data;
  if (s.events.empty() || !json::accept(s.events.back().data)) return "";
  const auto last = json::parse(s.events.back().data);
  return last.contains("error") ? last["error"].value("code", "") : "";
}

// Waits (bounded) until `flag` is set.
bool wait_for(const std::atomic<bool>& flag) {
  return eventually([&] { return flag.load(); }, 10000ms);
}

TEST(SseEnds, AnUpstreamFailureAfterHalfAnEventEndsWithAnErrorEventThatParses) {
  std::atomic<bool> first_seen{false};
  std::atomic<int> streams{0};
  FakeUpstream up([&](const UpstreamRequest& r) {
    if (r.body.find("\"stream\":true") == std::string::npos) return echo(r);
    streams += 1;
    FakeUpstream::Reply reply;
    // One whole event and the start of the next; then (once the client has
    // the first) the rest of that one and half of a third, and the close.
    reply.bytes = std::string(kSseHead) + chunk("data: {\"n\":1}\n\ndata: {\"n\"");
    reply.then = [&] {
      wait_for(first_seen);
      return chunk(":2}\n\ndata: {\"rid\": \"fac85");
    };
    reply.close_after = true;
    return reply;
  });
  TempFile cfg(make_config({up.address()}, "  endpointEjectionConsecutiveFailures: 0\n"));
  auto sluice = start_sluice(cfg);
  HttpClient client(kHost, sluice->port());
  auto s = client.stream("/v1/completions", completion_body(8, true), {},
                         [&](const Response&, const SseEvent&) {
                           first_seen = true;
                           return true;
                         });
  EXPECT_EQ(s.head.status, 200);
  EXPECT_FALSE(s.complete);  // the transfer is visibly cut
  ASSERT_EQ(s.events.size(), 3u) << s.error;
  EXPECT_EQ(s.events[0].data, "{\"n\":1}");
  EXPECT_EQ(s.events[1].data, "{\"n\":2}");
  EXPECT_EQ(check_events(s), "upstream-error");
  // Nothing else lost: the next request is served whole, and both are counted.
  HttpClient next(kHost, sluice->port());
  auto r = next.post_json("/v1/completions", completion_body(1, false, "after"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("after"), std::string::npos);
  EXPECT_EQ(streams.load(), 1);
  EXPECT_TRUE(eventually([&] {
    return outcome_count(sluice->admin_port(), "upstream-error") == 1 &&
           outcome_count(sluice->admin_port(), "served") == 1;
  }));
}

TEST(SseEnds, AnEvictionAfterHalfAnEventEndsWithAnErrorEventThatParses) {
  std::atomic<bool> first_seen{false}, release{false};
  FakeUpstream up([&](const UpstreamRequest& r) {
    if (r.body.find("\"stream\":true") == std::string::npos) return echo(r);
    FakeUpstream::Reply reply;
    reply.bytes = std::string(kSseHead) + chunk("data: {\"n\":1}\n\ndata: {\"rid\": \"fac85");
    reply.then = [&] {
      wait_for(release);  // sluice closes this connection long before
      return chunk("\"}\n\n");
    };
    reply.close_after = true;
    return reply;
  });
  TempFile cfg(fc_config(up.address(), 1, "round-robin-fairness-policy",
                         "  enableEviction: true\n"
                         "  priorityBands:\n    - {priority: 100}\n    - {priority: -10}\n"));
  auto sluice = start_sluice(cfg);
  StreamResult s;
  std::thread streamer([&] {
    HttpClient c(kHost, sluice->port());
    s = c.stream("/v1/completions", completion_body(8, true), flow("batch", "best-effort"),
                 [&](const Response&, const SseEvent&) {
                   first_seen = true;
                   return true;
                 });
  });
  ASSERT_TRUE(wait_for(first_seen));
  // The one slot is the stream's: an interactive request evicts it.
  HttpClient hi(kHost, sluice->port());
  auto r = hi.post_json("/v1/completions", completion_body(1, false, "protected"),
                        flow("chat", "interactive"));
  streamer.join();
  release = true;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("protected"), std::string::npos);
  EXPECT_EQ(s.head.status, 200);
  EXPECT_TRUE(s.complete) << s.error;  // the eviction ends the stream properly
  ASSERT_EQ(s.events.size(), 2u) << s.error;
  EXPECT_EQ(s.events[0].data, "{\"n\":1}");
  EXPECT_EQ(check_events(s), "evicted-preempted");
  EXPECT_TRUE(eventually([&] {
    return outcome_count(sluice->admin_port(), "evicted-preempted") == 1 &&
           outcome_count(sluice->admin_port(), "served") == 1;
  }));
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Issue 33, rough edge 6: an evicted request whose client does not read
// kept its upstream (and its slot) until clientWriteTimeout; the protected
// request waited 18 s. Eviction now frees the slot at once, whatever the
// client's write state: the protected request is served while the stalled
// client's connection is still open (its write timeout is a minute away).
TEST(SseEnds, AnEvictedStreamWhoseClientDoesNotReadFreesItsSlotAtOnce) {
  FakeUpstream up([&](const UpstreamRequest& r) {
    if (r.body.find("\"stream\":true") == std::string::npos) return echo(r);
    // 64 MiB: far more than every buffer between here and the client holds.
    std::string events;
    for (int i = 0; i < 1024; ++i)
      events += "data: {\"token\":\"" + std::string(4000, 't') + "\"}\n\n";
    FakeUpstream::Reply reply{std::string(kSseHead), true};
    for (int i = 0; i < 16; ++i) reply.bytes += chunk(events);
    return reply;
  });
  TempFile cfg(with_server(fc_config(up.address(), 1, "round-robin-fairness-policy",
                                     "  enableEviction: true\n"
                                     "  priorityBands:\n    - {priority: 100}\n"
                                     "    - {priority: -10}\n"),
                           "  clientWriteTimeout: 60s\n"));
  auto sluice = start_sluice(cfg);
  // A client that asks for the stream and never reads it, with a small window.
  RawConnection stalled(kHost, sluice->port(), 4096);
  const std::string body = completion_body(100000, true);
  ASSERT_TRUE(stalled.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "x-gateway-inference-fairness-id: batch\r\nx-gateway-inference-objective: best-effort\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body));
  // sluice's write to that client is under way, and stays so: its socket's
  // send buffer is full (ss), or the bytes queued for the client (who reads
  // nothing) stopped growing over 50 ms though the engine has 64 MiB more to
  // send, which only a pending write explains (the kernel may still grow
  // the buffer's size past what is queued).
  auto queued = [&] { return tcp_send_queue(sluice->port(), stalled.local_port()); };
  ASSERT_TRUE(eventually(
      [&] {
        if (tcp_send_buffer_full(sluice->port(), stalled.local_port())) return true;
        const long before = queued();
        std::this_thread::sleep_for(50ms);
        return before >= (1 << 20) && queued() == before;
      },
      20000ms))
      << queued();
  EXPECT_EQ(up.requests().size(), 1u);

  HttpClient hi(kHost, sluice->port(), 30000ms);
  auto r = hi.post_json("/v1/completions", completion_body(1, false, "protected"),
                        flow("chat", "interactive"));
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_NE(r.body.find("protected"), std::string::npos);
  // Served while the stalled client is still connected: the eviction did
  // not wait for its write.
  EXPECT_GE(tcp_send_queue(sluice->port(), stalled.local_port()), 0);
  // The engine saw its connection close (its reply stopped going out).
  EXPECT_TRUE(eventually([&] { return up.send_failures() == 1; }));
  EXPECT_TRUE(eventually([&] {
    return scrape_metric(kHost, sluice->admin_port(),
                         "sluice_flow_control_evictions_total{result=\"issued\"}") == 1;
  }));
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Issue 33, rough edge 11: a steering header sent twice was taken silently
// (the last copy won). Which copy a proxy in front keeps or joins is
// anyone's guess, so the request is refused, 400 repeated-steering-header,
// and nothing reaches the endpoint; the llm-d name next to its alias is not
// a repeat (the llm-d one wins, as documented).
TEST(HeaderAliases, ASteeringHeaderSentTwiceIsRefused) {
  FakeUpstream up(echo);
  TempFile cfg(make_config({up.address()}));
  auto sluice = start_sluice(cfg);
  const std::string body = completion_body(1);
  for (const char* name : {"x-llm-d-inference-fairness-id", "x-gateway-inference-fairness-id",
                           "x-llm-d-inference-objective", "x-gateway-inference-objective",
                           "x-gateway-inference-ttl-ms", "x-llm-d-slo-ttft-ms", "x-slo-ttft-ms"}) {
    SCOPED_TRACE(name);
    RawConnection raw(kHost, sluice->port());
    ASSERT_TRUE(raw.send(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                     "Content-Type: application/json\r\nConnection: close\r\n") +
                         name + ": 100\r\nX-Other: 1\r\n" + name + ": 200\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
    bool closed = false;
    const std::string text = raw.read_until_close(10000ms, &closed);
    EXPECT_EQ(text.rfind("HTTP/1.1 400 ", 0), 0u) << text;
    const auto at = text.find("\r\n\r\n");
    ASSERT_NE(at, std::string::npos) << text;
    const auto error = json::parse(text.substr(at + 4))["error"];
    EXPECT_EQ(error["code"], "repeated-steering-header");
    EXPECT_NE(error["message"].get<std::string>().find(name), std::string::npos);
  }
  EXPECT_EQ(up.requests().size(), 0u);
  // An llm-d name with its alias is no repeat; the next request is served.
  HttpClient client(kHost, sluice->port());
  auto r = client.post_json(
      "/v1/completions", body,
      {{"x-llm-d-inference-fairness-id", "a"}, {"x-gateway-inference-fairness-id", "b"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(up.requests().size(), 1u);
  EXPECT_TRUE(eventually(
      [&] { return outcome_count(sluice->admin_port(), "repeated-steering-header") == 7; }));
}

}  // namespace
}  // namespace sluice::test
