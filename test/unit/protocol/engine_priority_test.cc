#include "protocol/engine_priority.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sluice::protocol {
namespace {

using nlohmann::json;

TEST(EnginePriority, BandToVllmScale) {
  EXPECT_EQ(engine_priority_for_band(100), -100);  // more important: lower in vLLM
  EXPECT_EQ(engine_priority_for_band(-10), 10);
  EXPECT_EQ(engine_priority_for_band(0), 0);
}

TEST(EnginePriority, InsertedFirstTheRestByteForByte) {
  EXPECT_EQ(body_with_priority(R"({"model":"m","prompt":"x"})", -5),
            R"({"priority":-5,"model":"m","prompt":"x"})");
  EXPECT_EQ(body_with_priority("  {  \"model\" : \"m\"  }  ", 3),
            "  {\"priority\":3,\"model\" : \"m\"  }  ");
  EXPECT_EQ(body_with_priority("{}", 1), R"({"priority":1})");
  EXPECT_EQ(body_with_priority("{ }\n", 1), "{\"priority\":1}\n");
}

// A tenant's own priority never reaches a priority-scheduling engine,
// wherever it sits, however its key is spelled; nested ones are content.
TEST(EnginePriority, ClientPriorityIsRemoved) {
  auto check = [](const std::string& body, const json& want) {
    const std::string out = body_with_priority(body, 7);
    auto j = json::parse(out);
    EXPECT_EQ(j, want) << out;
    // No other top-level priority left for a last-key-wins parser to take.
    EXPECT_EQ(out.rfind("\"priority\":7"), out.find("\"priority\":7")) << out;
    EXPECT_EQ(out.find("-1000"), std::string::npos) << out;
    EXPECT_EQ(out.find("\"priority\":2"), std::string::npos) << out;
  };
  check(R"({"priority":-1000,"model":"m"})", json{{"priority", 7}, {"model", "m"}});
  check(R"({"model":"m","priority":-1000})", json{{"priority", 7}, {"model", "m"}});
  check(R"({"model":"m", "priority" : -1000 , "max_tokens":5})",
        json{{"priority", 7}, {"model", "m"}, {"max_tokens", 5}});
  check(R"({"priority":-1})", json{{"priority", 7}});
  check(R"({"priorit\u0079":-1000,"model":"m"})", json{{"priority", 7}, {"model", "m"}});
  check(R"({"priority":{"a":[1,"}"]},"model":"m"})", json{{"priority", 7}, {"model", "m"}});
  check(R"({"priority":1,"priority":2,"model":"m"})", json{{"priority", 7}, {"model", "m"}});
  check(R"({"metadata":{"priority":-9},"prompt":"\"priority\":-9"})",
        json{{"priority", 7}, {"metadata", {{"priority", -9}}}, {"prompt", "\"priority\":-9"}});
}

}  // namespace
}  // namespace sluice::protocol

namespace sluice::protocol {
namespace {

TEST(BodyWithMember, ReplacesEveryNamedKeyOnce) {
  static constexpr std::string_view kDrop[] = {"max_tokens", "max_completion_tokens"};
  EXPECT_EQ(body_with_member(R"({"model":"m","max_tokens":9000,"max_completion_tokens":5})", kDrop,
                             "max_tokens", 100),
            R"({"max_tokens":100,"model":"m"})");
  EXPECT_EQ(body_with_member(R"({"model":"m"})", kDrop, "max_tokens", 7),
            R"({"max_tokens":7,"model":"m"})");
  EXPECT_EQ(body_with_member(R"({"max_tok\u0065ns":1})", kDrop, "max_tokens", 7),
            R"({"max_tokens":7})");
  EXPECT_EQ(body_with_member("{}", kDrop, "max_tokens", 7), R"({"max_tokens":7})");
}

TEST(EnginePriority, SeveralMembersPutFirstEveryOccurrenceDropped) {
  static constexpr std::string_view kDrop[] = {"max_tokens", "max_completion_tokens",
                                               "max_output_tokens"};
  const Member put[] = {{"max_completion_tokens", 16}, {"max_tokens", 5}};
  EXPECT_EQ(body_with_members(
                R"({"model":"m","max_completion_tokens":100000,"max_tokens":5,"max_tokens":null})",
                kDrop, put),
            R"({"max_completion_tokens":16,"max_tokens":5,"model":"m"})");
  // Nothing dropped: the rest as it came.
  EXPECT_EQ(body_with_members(R"({"model":"m", "x": [1, 2]})", kDrop, put),
            R"({"max_completion_tokens":16,"max_tokens":5,"model":"m", "x": [1, 2]})");
  EXPECT_EQ(body_with_members("{}", kDrop, put), R"({"max_completion_tokens":16,"max_tokens":5})");
  // Nothing put: the members dropped, the rest kept.
  EXPECT_EQ(body_with_members(R"({"max_tokens":1,"model":"m"})", kDrop, {}), R"({"model":"m"})");
}

}  // namespace
}  // namespace sluice::protocol
