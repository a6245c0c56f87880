// admission's pool step without a socket or a thread: GIE's legacy
// admission, with the pool's saturation a value the test chooses.
#include "admission/pool.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::admission {
namespace {

struct Fixture {
  Fixture() {
    objectives["interactive"] = ObjectiveInfo{10, std::chrono::seconds(30)};
    objectives["standard"] = ObjectiveInfo{0, std::nullopt};
    objectives["batch"] = ObjectiveInfo{-1, std::nullopt};
    objectives["best-effort"] = ObjectiveInfo{-10, std::nullopt};
  }
  bool sheddable_with(std::string objective) {
    head.objective = std::move(objective);
    Request r(head, identity, protocol::Route::kChatCompletions);
    const std::string sent = head.objective;
    const bool s = sheddable(objectives, r);
    EXPECT_EQ(head.objective, sent);  // never changed
    return s;
  }
  Objectives objectives;
  protocol::RequestHead head;
  auth::Identity identity;
};

TEST(AdmissionPool, OnlyAKnownObjectiveBelowPriorityZeroIsSheddable) {
  Fixture f;
  EXPECT_TRUE(f.sheddable_with("batch"));
  EXPECT_TRUE(f.sheddable_with("best-effort"));
  EXPECT_FALSE(f.sheddable_with("standard"));     // priority 0
  EXPECT_FALSE(f.sheddable_with("interactive"));  // above
  EXPECT_FALSE(f.sheddable_with("unknown"));      // an unknown objective is priority 0
  EXPECT_FALSE(f.sheddable_with(""));             // none named
}

TEST(AdmissionPool, ASheddableRequestGoesOnWhileThePoolHasRoom) {
  EXPECT_TRUE(shed_when_saturated(/*sheddable=*/true, /*pool_saturated=*/false).admitted());
  EXPECT_TRUE(shed_when_saturated(false, false).admitted());
}

TEST(AdmissionPool, AProtectedRequestGoesOnWhileThePoolIsSaturated) {
  EXPECT_TRUE(shed_when_saturated(/*sheddable=*/false, /*pool_saturated=*/true).admitted());
}

TEST(AdmissionPool, ASheddableRequestIsShedWithRejectedCapacityWhileThePoolIsSaturated) {
  const Verdict v = shed_when_saturated(true, true);
  ASSERT_FALSE(v.admitted());
  const flowcontrol::ErrorAnswer& a = v.answer();
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.reason, "rejected-capacity");
  EXPECT_EQ(a.llmd_reason, "rejected-saturated");
  EXPECT_EQ(a.code, "rejected-capacity");
  EXPECT_EQ(a.retry_after_seconds, 1);
  EXPECT_FALSE(a.close_connection);
  const auto error = nlohmann::json::parse(a.body)["error"];
  EXPECT_EQ(error["code"], "rejected-capacity");
  EXPECT_EQ(error["type"], "rate_limit_error");
  EXPECT_EQ(error["message"], "system saturated, sheddable request dropped");
}

}  // namespace
}  // namespace sluice::admission
