#include "protocol/openai_request.h"

#include <gtest/gtest.h>

namespace sluice::protocol {
namespace {

ParseResult parse(std::string body, std::string* text = nullptr) {
  return parse_openai_request(body, text);
}

TEST(OpenAIRequest, ChatMessages) {
  std::string text;
  auto r = parse(R"({"model":"llama","stream":true,"stream_options":{"include_usage":true},
    "max_completion_tokens":64,"messages":[{"role":"system","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"hello there"},{"type":"image_url","image_url":{"url":"x"}}]}]})",
                 &text);
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(r.request.model, "llama");
  EXPECT_TRUE(r.request.stream);
  EXPECT_TRUE(r.request.include_usage);
  EXPECT_EQ(r.request.max_tokens, 64);
  EXPECT_EQ(r.request.message_count, 2u);
  EXPECT_EQ(r.request.prompt_chars, 8u + 11u);
  EXPECT_EQ(text, "be brief\nhello there");
  // ceil(19/4) + 3 per message
  EXPECT_EQ(r.request.estimated_input_tokens, 5u + 6u);
}

TEST(OpenAIRequest, CompletionPromptForms) {
  auto s = parse(R"({"model":"m","prompt":"abcdefgh","max_tokens":7})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.request.estimated_input_tokens, 2u);
  EXPECT_EQ(s.request.max_tokens, 7);
  EXPECT_FALSE(s.request.stream);
  auto a = parse(R"({"model":"m","prompt":["abcd","efgh"]})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.request.prompt_chars, 8u);
  auto ids = parse(R"({"model":"m","prompt":[1,2,3,4,5]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.request.prompt_token_ids, 5u);
  EXPECT_EQ(ids.request.estimated_input_tokens, 5u);
  auto input = parse(R"({"model":"m","input":"abcdefghijkl"})");
  ASSERT_TRUE(input.ok());
  EXPECT_EQ(input.request.estimated_input_tokens, 3u);
  auto null_max = parse(R"({"model":"m","prompt":"x","max_tokens":null})");
  ASSERT_TRUE(null_max.ok());
  EXPECT_FALSE(null_max.request.max_tokens.has_value());
}

// Issue 39, item 1: every output-token limit a body carries counts, every
// occurrence of a repeated key too; the largest is the request's.
TEST(OpenAIRequest, EveryOutputLimitCountsAndTheLargestIsTheRequests) {
  auto chat = parse(R"({"model":"m","max_completion_tokens":100000,"max_tokens":5})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat.request.max_tokens, 100000);
  EXPECT_TRUE(chat.request.output_limits[0].present);
  EXPECT_EQ(chat.request.output_limits[0].max, 5);
  EXPECT_EQ(chat.request.output_limits[1].max, 100000);
  EXPECT_FALSE(chat.request.output_limits[2].present);
  auto responses = parse(R"({"model":"m","max_output_tokens":100000,"max_tokens":5})");
  EXPECT_EQ(responses.request.max_tokens, 100000);
  EXPECT_EQ(responses.request.output_limits[2].max, 100000);
  // A key repeated: the engine reads the last, the ceiling sees the largest.
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":9000,"max_tokens":1})").request.max_tokens, 9000);
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":1,"max_tokens":9000})").request.max_tokens, 9000);
  // An escaped key is the same key.
  EXPECT_EQ(
      parse(R"({"model":"m","max_tokens":1,"max_completion_tok\u0065ns":77})").request.max_tokens,
      77);
  // null is the engine's default (no limit of the client's): marked, not a value.
  auto nulls = parse(R"({"model":"m","max_tokens":5,"max_tokens":null})");
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(nulls.request.max_tokens, 5);
  EXPECT_TRUE(nulls.request.output_limits[0].has_null);
  // Anything but a non-negative integer (or null) in any of them is refused.
  for (const char* bad :
       {R"({"model":"m","max_completion_tokens":-1,"max_tokens":5})",
        R"({"model":"m","max_output_tokens":"100000"})", R"({"model":"m","max_tokens":5.5})",
        R"({"model":"m","max_completion_tokens":1e9})",
        R"({"model":"m","max_tokens":18446744073709551615})",
        R"({"model":"m","max_output_tokens":[1]})", R"({"model":"m","max_tokens":true})"}) {
    auto r = parse(bad);
    EXPECT_EQ(r.error_code, "invalid-field") << bad;
  }
}

TEST(OpenAIRequest, Malformed) {
  for (const char* bad : {"", "{", "{\"model\":\"m\",}", "not json", "{\"model\":\"m\"} trailing",
                          "{\"model\":\"m\",\"prompt\":\"x\" \"y\"}"}) {
    auto r = parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error_code, "invalid-json") << bad;
  }
  auto arr = parse("[1,2]");
  EXPECT_EQ(arr.error_code, "invalid-json");
}

TEST(OpenAIRequest, MissingOrBadFields) {
  EXPECT_EQ(parse(R"({"prompt":"x"})").error_code, "missing-model");
  EXPECT_EQ(parse(R"({"model":""})").error_code, "missing-model");
  EXPECT_EQ(parse(R"({"model":5})").error_code, "invalid-field");
  EXPECT_EQ(parse(R"({"model":"m","stream":"yes"})").error_code, "invalid-field");
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":"ten"})").error_code, "invalid-field");
  EXPECT_EQ(parse(R"({"model":"m","max_tokens":-1})").error_code, "invalid-field");
  EXPECT_EQ(parse(R"({"model":"m","messages":"hi"})").error_code, "invalid-field");
  EXPECT_EQ(parse(R"({"model":"m","messages":["hi"]})").error_code, "invalid-field");
  // n and best_of: a whole number of at least 1, or null; anything an
  // engine could read differently is refused.
  for (const char* bad : {R"("n":0)", R"("n":-2)", R"("n":2.5)", R"("n":"2")", R"("best_of":0)",
                          R"("n":1e30)", R"("best_of":[2])", R"("n":true)"})
    EXPECT_EQ(parse(std::string(R"({"model":"m",)") + bad + "}").error_code, "invalid-field")
        << bad;
  EXPECT_EQ(parse(R"({"model":"m","n":3,"best_of":2})").request.choices, 3u);
  EXPECT_EQ(parse(R"({"model":"m","n":null})").request.choices, 1u);
}

TEST(OpenAIRequest, BodyContentsUnchanged) {
  std::string body = R"({"model":"m","prompt":"x"})";
  const std::string before = body;
  auto r = parse_openai_request(body);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(body, before);
}

TEST(ContentType, Json) {
  EXPECT_TRUE(is_json_content_type("application/json"));
  EXPECT_TRUE(is_json_content_type("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(is_json_content_type(""));
  EXPECT_FALSE(is_json_content_type("text/plain"));
  EXPECT_FALSE(is_json_content_type("application/x-www-form-urlencoded"));
  EXPECT_FALSE(is_json_content_type("application/jsonx"));
}

TEST(Routes, Classify) {
  EXPECT_EQ(classify_target("/v1/chat/completions"), Route::kChatCompletions);
  EXPECT_EQ(classify_target("/v1/completions?x=1"), Route::kCompletions);
  EXPECT_EQ(classify_target("/v1/models"), Route::kModels);
  EXPECT_EQ(classify_target("/v1/embeddings"), Route::kEmbeddings);
  EXPECT_EQ(classify_target("/v1/responses"), Route::kResponses);
  EXPECT_EQ(classify_target("/v1/chat/completions/"), Route::kUnknown);
  EXPECT_EQ(classify_target("/"), Route::kUnknown);
  EXPECT_TRUE(is_inference(Route::kResponses));
  EXPECT_FALSE(is_inference(Route::kModels));
}

}  // namespace
}  // namespace sluice::protocol

namespace sluice::protocol {
namespace {

TEST(OpenAIRequest, PromptTextStopsAtTheLimitButCountsEverything) {
  std::string body = R"({"model":"m","messages":[{"role":"system","content":"0123456789abcdef"},)"
                     R"({"role":"user","content":"ghijklmnop"}]})";
  std::string text;
  auto r = parse_openai_request(body, &text, 12);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(text, "0123456789ab");
  EXPECT_EQ(r.request.prompt_chars, 26u);
}

}  // namespace
}  // namespace sluice::protocol
