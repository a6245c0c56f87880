// admission::check_steering without a socket or a thread: each refusal's
// status, reason, code and message, and the request as it was sent.
#include "admission/steering.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::admission {
namespace {

constexpr std::size_t kMaxIdBytes = 16;

struct Fixture {
  Verdict check() {
    const protocol::RequestHead before = head;
    Request r(head, identity, protocol::Route::kChatCompletions);
    Verdict v = check_steering(r, kMaxIdBytes);
    // The step decides; it never changes the request.
    EXPECT_EQ(head.fairness_id, before.fairness_id);
    EXPECT_EQ(head.objective, before.objective);
    EXPECT_EQ(head.repeated_steering, before.repeated_steering);
    return v;
  }
  protocol::RequestHead head;
  auth::Identity identity;
};

nlohmann::json error_of(const flowcontrol::ErrorAnswer& a) {
  return nlohmann::json::parse(a.body)["error"];
}

TEST(AdmissionSteering, AbsentAndValidValuesGoOn) {
  Fixture f;
  EXPECT_TRUE(f.check().admitted());
  f.head.fairness_id = "org:team/a@x=";
  f.head.objective = "interactive";
  EXPECT_TRUE(f.check().admitted());
  f.head.fairness_id = std::string(kMaxIdBytes, 'a');  // exactly the limit
  f.head.objective = std::string(kMaxIdBytes, 'b');
  EXPECT_TRUE(f.check().admitted());
}

TEST(AdmissionSteering, ARepeatedSteeringHeaderIs400) {
  Fixture f;
  f.head.fairness_id = "team-a";
  f.head.repeated_steering = "x-gateway-inference-fairness-id";
  const Verdict v = f.check();
  ASSERT_FALSE(v.admitted());
  const flowcontrol::ErrorAnswer& a = v.answer();
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.reason, "");  // the access log shows the code
  EXPECT_EQ(a.code, "repeated-steering-header");
  EXPECT_FALSE(a.close_connection);
  EXPECT_EQ(error_of(a)["code"], "repeated-steering-header");
  EXPECT_EQ(error_of(a)["type"], "invalid_request_error");
  EXPECT_EQ(error_of(a)["message"],
            "the steering header x-gateway-inference-fairness-id was sent more than once; send "
            "each at most once");
}

TEST(AdmissionSteering, AFairnessIdOutsideTheTokenCharactersOrTooLongIs400) {
  const std::string message =
      "the fairness id (x-llm-d-inference-fairness-id or x-gateway-inference-fairness-id) must "
      "be 1 to 16 token characters (letters, digits, !#$%&'*+-.^_`|~:/@=)";
  for (const std::string& bad : {std::string("team a"), std::string("t\x01"),
                                 std::string(kMaxIdBytes + 1, 'a'), std::string("\xc3\xa9")}) {
    Fixture f;
    f.head.fairness_id = bad;
    f.head.objective = "also bad";  // the fairness id is checked first
    const Verdict v = f.check();
    ASSERT_FALSE(v.admitted()) << bad;
    EXPECT_EQ(v.answer().status, 400);
    EXPECT_EQ(v.answer().code, "invalid-fairness-id");
    EXPECT_EQ(error_of(v.answer())["code"], "invalid-fairness-id");
    EXPECT_EQ(error_of(v.answer())["message"], message);
  }
}

TEST(AdmissionSteering, AnObjectiveOutsideTheTokenCharactersOrTooLongIs400) {
  for (const std::string& bad :
       {std::string("inter active"), std::string(kMaxIdBytes + 1, 'o'), std::string("a\"b")}) {
    Fixture f;
    f.head.fairness_id = "team-a";
    f.head.objective = bad;
    const Verdict v = f.check();
    ASSERT_FALSE(v.admitted()) << bad;
    EXPECT_EQ(v.answer().status, 400);
    EXPECT_EQ(v.answer().code, "invalid-objective");
    EXPECT_EQ(error_of(v.answer())["code"], "invalid-objective");
    EXPECT_EQ(error_of(v.answer())["message"],
              "the objective (x-llm-d-inference-objective or x-gateway-inference-objective) must "
              "be 1 to 16 token characters");
  }
}

TEST(AdmissionSteering, ARepeatedHeaderIsRefusedBeforeTheValuesAreRead) {
  Fixture f;
  f.head.fairness_id = "bad id";
  f.head.repeated_steering = "x-llm-d-inference-objective";
  const Verdict v = f.check();
  ASSERT_FALSE(v.admitted());
  EXPECT_EQ(v.answer().code, "repeated-steering-header");
}

}  // namespace
}  // namespace sluice::admission
