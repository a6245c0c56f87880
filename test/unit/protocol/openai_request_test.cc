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
