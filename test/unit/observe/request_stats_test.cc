#include "observe/request_stats.h"

#include <gtest/gtest.h>

#include "observe/access_log.h"
#include "observe/metrics_text.h"

namespace sluice::observe {
namespace {

// Model names come from clients: beyond the cap they fold into "(other)",
// in each thread's stats and again when merged.
TEST(RequestStats, ModelsBeyondTheCapFoldIntoOther) {
  ThreadStats a(2), b(2);
  a.model("m1").requests = 1;
  a.model("m2").requests = 1;
  a.model("m3").requests += 1;
  a.model("m4").requests += 1;
  EXPECT_EQ(a.models.size(), 3u);
  EXPECT_EQ(a.models["(other)"].requests, 2u);
  b.model("m5").requests = 5;
  b.model("m1").requests = 4;
  ThreadStats merged(2);
  merged.merge(a);
  merged.merge(b);
  EXPECT_EQ(merged.models["m1"].requests, 5u);
  EXPECT_EQ(merged.models["(other)"].requests, 7u);  // m3, m4 and m5
  EXPECT_EQ(merged.models.count("m5"), 0u);
  EXPECT_EQ(a.model("").requests, a.models["(other)"].requests);  // no name: folded too
}

// Issue 39, item 7: a tenant named "other" is a tenant like any other, never
// the overflow series.
TEST(RequestStats, ATenantNamedOtherIsNotTheOverflow) {
  ThreadStats a(2);
  a.tenant("other").input_tokens = 5;
  a.tenant("t1").input_tokens = 1;
  a.tenant("t2").input_tokens += 7;  // past the cap of 2
  a.tenant("t3").input_tokens += 1;
  EXPECT_EQ(a.tenants["other"].input_tokens, 5u);
  EXPECT_EQ(a.tenants[std::string(kOverflowLabel)].input_tokens, 8u);
  ThreadStats merged(2);
  merged.merge(a);
  EXPECT_EQ(merged.tenants["other"].input_tokens, 5u);
  EXPECT_EQ(merged.tenants[std::string(kOverflowLabel)].input_tokens, 8u);
  EXPECT_EQ(kOverflowLabel.find_first_of("()"), 0u);  // not a token character
}

TEST(RequestStats, RendersCountsAndHistograms) {
  ThreadStats s(10);
  auto& m = s.model("llama");
  m.requests = 3;
  m.errors["rejected-capacity"] = 1;
  m.duration.record_seconds(0.2);
  m.duration.record_seconds(40);
  m.output_tokens.record(100);
  s.outcome("served");
  s.outcome("served");
  s.outcome("rejected-capacity");
  s.endpoint(1).connections_reused = 7;
  MetricsText t;
  s.render(t, {"a:1", "b:2"});
  const auto& text = t.text();
  EXPECT_NE(text.find("inference_objective_request_total{model_name=\"llama\",target_model_name="
                      "\"llama\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("error_code=\"rejected-capacity\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("inference_objective_request_duration_seconds_bucket{model_name=\"llama\","
                      "target_model_name="
                      "\"llama\",le=\"0.25\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("le=\"60\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_requests_total{outcome=\"served\"} 2\n"), std::string::npos);
  EXPECT_NE(
      text.find("sluice_upstream_connections_total{endpoint=\"b:2\",connection=\"reused\"} 7\n"),
      std::string::npos);
}

TEST(AccessLog, JsonStringsAreEscaped) {
  std::string out;
  append_json_string(out, "a\"b\\c\nd\x01");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\"");
}

}  // namespace
}  // namespace sluice::observe
