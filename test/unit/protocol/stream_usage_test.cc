// Asking for a stream's usage on a client's behalf, and taking the usage
// event out of what the client sees (issue 41: exact input tokens for a
// stream under a quota).
#include "protocol/stream_usage.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/openai_request.h"

namespace sluice::protocol {
namespace {

TEST(StreamUsage, TheBodyAsksForUsageAndStaysTheSameOtherwise) {
  for (const std::string body : {R"({"model":"m","stream":true,"messages":[]})",
                                 R"(  {  "model" : "m", "stream": true } )"}) {
    const std::string out = body_with_stream_usage(body);
    std::string padded = out;
    const auto r = parse_openai_request(padded);
    ASSERT_TRUE(r.ok()) << out;
    EXPECT_TRUE(r.request.include_usage) << out;
    EXPECT_TRUE(r.request.stream) << out;
    EXPECT_EQ(r.request.model, "m");
    EXPECT_EQ(out.size(),
              body.size() + std::string(R"("stream_options":{"include_usage":true},)").size());
  }
  EXPECT_EQ(body_with_stream_usage("{}"), R"({"stream_options":{"include_usage":true}})");
}

TEST(StreamUsage, OnlyTheUsageEventIsTakenOut) {
  const std::string token =
      "data: {\"choices\":[{\"index\":0,\"text\":\"usage\"}],\"usage\":null}\n\n";
  const std::string usage_vllm =
      "data: "
      "{\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n";
  const std::string usage_sglang =
      "data: {\"id\": \"c\", \"choices\": [], \"usage\": {\"prompt_tokens\": 5}}\r\n\r\n";
  const std::string done = "data: [DONE]\n\n";
  std::string body = token + usage_vllm + done;
  EXPECT_EQ(drop_usage_events(body, body.size()), usage_vllm.size());
  EXPECT_EQ(body, token + done);
  body = token + usage_sglang + done;
  EXPECT_EQ(drop_usage_events(body, body.size()), usage_sglang.size());
  EXPECT_EQ(body, token + done);
  // A token event that mentions usage, a choices array not empty, an event
  // not whole yet: all kept byte for byte.
  const std::string partial = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5}}";
  body = token + "data: {\"choices\":[{}],\"usage\":{\"a\":1}}\n\n" + partial;
  const std::string before = body;
  EXPECT_EQ(drop_usage_events(body, body.size()), 0u);
  EXPECT_EQ(body, before);
  // Only the first `whole` bytes are looked at.
  body = usage_vllm + usage_vllm;
  EXPECT_EQ(drop_usage_events(body, usage_vllm.size()), usage_vllm.size());
  EXPECT_EQ(body, usage_vllm);
}

}  // namespace
}  // namespace sluice::protocol
