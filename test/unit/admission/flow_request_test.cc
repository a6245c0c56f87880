// admission's flow-control request without a socket, a thread or a clock:
// time is a value the test moves. The TTLs, priorities and sizes are worked
// by hand from the objectives below.
#include "admission/flow_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Fixture {
  Fixture() {
    objectives["interactive"] = ObjectiveInfo{10, seconds(30)};
    objectives["standard"] = ObjectiveInfo{0, std::nullopt};
    objectives["batch"] = ObjectiveInfo{-10, seconds(600)};
    head.body = R"({"model":"m","messages":[]})";
    body.model = "m";
    body.estimated_input_tokens = 42;
  }
  Verdict build() {
    const protocol::RequestHead before = head;
    Request r(head, identity, protocol::Route::kChatCompletions, &body);
    Verdict v = build_flow_request(objectives, now, r, out);
    // The step decides; the request stays as it was.
    EXPECT_EQ(head.fairness_id, before.fairness_id);
    EXPECT_EQ(head.objective, before.objective);
    EXPECT_EQ(head.ttl_ms, before.ttl_ms);
    EXPECT_EQ(head.body, before.body);
    return v;
  }
  Objectives objectives;
  flowcontrol::TimePoint now = flowcontrol::TimePoint{} + seconds(1000);  // a fake clock's
  protocol::RequestHead head;
  auth::Identity identity;
  protocol::OpenAIRequest body;
  FlowRequest out;
};

std::string message_of(const Verdict& v) {
  return nlohmann::json::parse(v.answer().body)["error"]["message"].get<std::string>();
}

TEST(AdmissionFlowRequest, ARequestNamingNothingIsTheDefaultFlowAtPriorityZero) {
  Fixture f;
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.flow_id, "default-flow");
  EXPECT_EQ(f.out.priority, 0);
  EXPECT_FALSE(f.out.ttl);
  EXPECT_FALSE(f.out.slo_ttft);
  EXPECT_EQ(f.out.received, f.now);
  EXPECT_EQ(f.out.bytes, f.head.body.size());
  EXPECT_EQ(f.out.input_tokens, 42u);
  EXPECT_EQ(f.out.max_output_tokens, 0u);  // none named
}

TEST(AdmissionFlowRequest, TheFairnessIdIsTheFlowAndTheObjectiveGivesPriorityAndTtl) {
  Fixture f;
  f.head.fairness_id = "acme/ui";
  f.head.objective = "interactive";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.flow_id, "acme/ui");
  EXPECT_EQ(f.out.flow_id.data(), f.head.fairness_id.data());  // a view, not a copy
  EXPECT_EQ(f.out.priority, 10);
  EXPECT_EQ(f.out.ttl, seconds(30));
  f.head.objective = "batch";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.priority, -10);
  EXPECT_EQ(f.out.ttl, seconds(600));
  f.head.objective = "standard";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.priority, 0);
  EXPECT_FALSE(f.out.ttl);  // the previous request's TTL is not kept
}

TEST(AdmissionFlowRequest, AnUnknownObjectiveIsPriorityZeroWithoutATtl) {
  Fixture f;
  f.head.objective = "premium";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.priority, 0);
  EXPECT_FALSE(f.out.ttl);
}

TEST(AdmissionFlowRequest, ATtlHeaderOnlyShortensTheObjectivesTtl) {
  Fixture f;
  f.head.objective = "interactive";  // 30 s
  f.head.ttl_ms = "1500";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, milliseconds(1500));
  f.head.ttl_ms = "45000";  // longer: the objective's stands
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(30));
  f.head.ttl_ms = "0";  // no TTL of the request's own
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(30));
  f.head.objective = "";  // none but the header's
  f.head.ttl_ms = "45000";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(45));
}

TEST(AdmissionFlowRequest, LlmdsTtlDurationAndTheWholeMillisecondsTheShorterWins) {
  Fixture f;
  f.head.ttl_duration = "2m30s";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(150));
  f.head.objective = "interactive";  // 30 s is shorter
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(30));
  f.head.ttl_duration = "1500ms";
  f.head.ttl_ms = "2000";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, milliseconds(1500));
  f.head.ttl_ms = "700";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, milliseconds(700));
  f.head.ttl_ms = "";
  f.head.ttl_duration = "0s";  // no TTL of the request's own
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.ttl, seconds(30));
}

TEST(AdmissionFlowRequest, ATtlHeaderThatDoesNotParseIs400InvalidTtl) {
  Fixture f;
  for (const char* bad : {"abc", "-5", "1.5", "10ms"}) {
    f.head.ttl_ms = bad;
    const Verdict v = f.build();
    ASSERT_FALSE(v.admitted()) << bad;
    EXPECT_EQ(v.answer().status, 400);
    EXPECT_EQ(v.answer().code, "invalid-ttl");
    EXPECT_EQ(v.answer().reason, "");
    EXPECT_EQ(message_of(v), "x-gateway-inference-ttl-ms must be a whole number of milliseconds");
  }
  f.head.ttl_ms = "";
  for (const char* bad : {"soon", "5", "-1s"}) {
    f.head.ttl_duration = bad;
    const Verdict v = f.build();
    ASSERT_FALSE(v.admitted()) << bad;
    EXPECT_EQ(v.answer().status, 400);
    EXPECT_EQ(v.answer().code, "invalid-ttl");
    EXPECT_EQ(message_of(v),
              "x-llm-d-inference-ttl must be a non-negative Go duration such as 1500ms or 2m30s");
  }
}

TEST(AdmissionFlowRequest, TheTtftObjectiveIsTakenOnlyAsWholeMilliseconds) {
  Fixture f;
  f.head.slo_ttft_ms = "250";
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.slo_ttft, milliseconds(250));
  f.head.slo_ttft_ms = "fast";  // ignored, as before: no refusal
  ASSERT_TRUE(f.build().admitted());
  EXPECT_FALSE(f.out.slo_ttft);
}

TEST(AdmissionFlowRequest, TheReceivedTimeIsTheCallersClockValue) {
  Fixture f;
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.received, flowcontrol::TimePoint{} + seconds(1000));
  f.now += milliseconds(1500);
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.received, flowcontrol::TimePoint{} + milliseconds(1001500));
}

TEST(AdmissionFlowRequest, MaxTokensSizesTheRequestClampedToTwoToTheTwentyFour) {
  Fixture f;
  f.body.max_tokens = 512;
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.max_output_tokens, 512u);
  f.body.max_tokens = std::int64_t{1} << 40;
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.max_output_tokens, std::uint64_t{1} << 24);
  f.body.max_tokens = -7;
  ASSERT_TRUE(f.build().admitted());
  EXPECT_EQ(f.out.max_output_tokens, 0u);
}

}  // namespace
}  // namespace sluice::admission
