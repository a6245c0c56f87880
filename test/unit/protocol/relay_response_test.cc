// What an endpoint's response head may carry towards the client: its own
// fields, never sluice's (an endpoint cannot speak for sluice: the request
// id, a drop reason, the session token, the time flow control held the
// request).
#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <string>

#include "protocol/proxy_parsers.h"

namespace sluice::protocol {
namespace {

ResponseHead parse(const std::string& wire, bool own_rate_limits = false) {
  ResponseHead head;
  RelayResponseParser parser(head, own_rate_limits);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  return head;
}

TEST(RelayResponse, SluicesOwnFieldsFromAnEndpointAreDroppedItsOwnKept) {
  const ResponseHead head = parse(
      "HTTP/1.1 200 OK\r\n"
      "Content-Length: 2\r\n"
      "X-Request-Id: forged\r\n"
      "x-gateway-inference-dropped-reason: forged\r\n"
      "X-Session-Token: forged\r\n"
      "x-llm-d-flow-queue-duration-ms: 99999\r\n"
      "X-LLM-D-Flow-Queue-Duration-Ms: 1\r\n"
      "x-engine-own: kept\r\n"
      "Cache-Control: no-store\r\n"
      "\r\n"
      "ok");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.forward_headers, "x-engine-own: kept\r\nCache-Control: no-store\r\n");
  EXPECT_EQ(head.body, "ok");
}

// An engine's (or a provider's) x-ratelimit-* pass through, unless sluice
// writes its own quotas' on the answer: then only sluice's are sent.
TEST(RelayResponse, AnEnginesRateLimitHeadersGoWhenSluiceSendsItsOwn) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\n"
      "Content-Length: 2\r\n"
      "x-ratelimit-remaining-tokens: 5\r\n"
      "X-RateLimit-Limit-Requests: 9\r\n"
      "x-ratelimited: kept\r\n"
      "\r\n"
      "ok";
  EXPECT_EQ(parse(wire).forward_headers,
            "x-ratelimit-remaining-tokens: 5\r\nX-RateLimit-Limit-Requests: 9\r\nx-ratelimited: "
            "kept\r\n");
  EXPECT_EQ(parse(wire, true).forward_headers, "x-ratelimited: kept\r\n");
}

}  // namespace
}  // namespace sluice::protocol
