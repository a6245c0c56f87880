#include "flowcontrol/outcome_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sluice::flowcontrol {
namespace {

TEST(OutcomeResponse, TableOfDesign) {
  struct Row {
    QueueOutcome outcome;
    int status;
    const char* reason;
    bool retry_after;
    const char* llmd;  // llm-d's x-llm-d-request-dropped-reason
  } rows[] = {
      {QueueOutcome::kRejectedCapacity, 429, "rejected-capacity", true, "rejected-saturated"},
      {QueueOutcome::kRejectedNoEndpoints, 503, "rejected-no-endpoints", true,
       "rejected-no-endpoints"},
      {QueueOutcome::kRejectedOther, 503, "rejected-other", false, ""},
      {QueueOutcome::kEvictedTTL, 503, "evicted-ttl", true, "rejected-ttl-expired"},
      {QueueOutcome::kEvictedDisplaced, 429, "evicted-displaced", true, "evicted-priority"},
      {QueueOutcome::kEvictedOther, 503, "evicted-other", false, "rejected-shutting-down"},
      {QueueOutcome::kEvictedPreempted, 429, "evicted-preempted", true, "evicted"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.reason);
    auto a = answer_for(row.outcome);
    EXPECT_EQ(a.status, row.status);
    EXPECT_EQ(a.reason, row.reason);
    EXPECT_EQ(a.llmd_reason, row.llmd);
    EXPECT_EQ(a.retry_after_seconds > 0, row.retry_after);
    auto body = nlohmann::json::parse(a.body);
    EXPECT_EQ(body["error"]["code"], row.reason);
    EXPECT_TRUE(body["error"]["message"].is_string());
    EXPECT_TRUE(body["error"]["type"].is_string());
  }
}

TEST(OutcomeResponse, ErrorBodyEscapes) {
  auto body = nlohmann::json::parse(openai_error_body("bad \"x\"\n\x01", "t", ""));
  EXPECT_EQ(body["error"]["message"], "bad \"x\"\n\x01");
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(OutcomeResponse, ClientErrorsCloseOnlyWhenInputIsUnread) {
  EXPECT_TRUE(client_error(413, "body-too-large", "x").close_connection);
  EXPECT_TRUE(client_error(431, "headers-too-large", "x").close_connection);
  EXPECT_FALSE(client_error(400, "invalid-json", "x").close_connection);
  EXPECT_FALSE(client_error(404, "not-found", "x").close_connection);
}

}  // namespace
}  // namespace sluice::flowcontrol
