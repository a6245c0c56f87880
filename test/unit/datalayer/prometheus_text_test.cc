#include "datalayer/prometheus_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace sluice::datalayer {
namespace {

TEST(PrometheusText, Vllm) {
  auto m = parse_engine_metrics(R"(# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 3
vllm:num_requests_waiting{model_name="b"} 2
vllm:num_requests_running{model_name="a",engine="0"} 7.0
vllm:kv_cache_usage_perc{model_name="a"} 0.42 1700000000000
vllm:cache_config_info{block_size="16",num_gpu_blocks="4096"} 1
)",
                                "vllm");
  EXPECT_TRUE(m.usable());
  EXPECT_EQ(m.waiting, 5);
  EXPECT_EQ(m.running, 7);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage, 0.42);
  EXPECT_EQ(m.bad_lines, 0u);
}

TEST(PrometheusText, OlderVllmKvName) {
  auto m =
      parse_engine_metrics("vllm:gpu_cache_usage_perc 0.9\nvllm:num_requests_waiting 1\n", "vllm");
  EXPECT_TRUE(m.has_kv);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage, 0.9);
}

TEST(PrometheusText, SglangAndTrtllm) {
  auto s = parse_engine_metrics(
      "sglang:num_queue_reqs{model_name=\"m\"} 4\nsglang:num_running_reqs 2\nsglang:token_usage "
      "0.5\n",
      "sglang");
  EXPECT_EQ(s.waiting, 4);
  EXPECT_EQ(s.running, 2);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage, 0.5);
  auto t = parse_engine_metrics(
      "trtllm_num_requests_waiting 1\ntrtllm_num_requests_running 3\ntrtllm_kv_cache_utilization "
      "0.25\n",
      "trtllm-serve");
  EXPECT_EQ(t.waiting, 1);
  EXPECT_EQ(t.running, 3);
  EXPECT_DOUBLE_EQ(t.kv_cache_usage, 0.25);
}

TEST(PrometheusText, BadLinesAreSkippedAndCounted) {
  auto m = parse_engine_metrics(
      "vllm:num_requests_waiting{model_name=\"a\\\"}\"} 2\n"  // escaped quote inside a label
      "vllm:num_requests_running NaN\n"
      "vllm:num_requests_running{unterminated=\"x\n"
      "9bad 1\n"
      "vllm:num_requests_running abc\n"
      "\r\n"
      "vllm:kv_cache_usage_perc 7\n",  // clamped to 1
      "vllm");
  EXPECT_EQ(m.waiting, 2);
  EXPECT_FALSE(m.has_running);
  EXPECT_EQ(m.bad_lines, 4u);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage, 1.0);
}

TEST(PrometheusText, NothingUsable) {
  EXPECT_FALSE(parse_engine_metrics("", "vllm").usable());
  EXPECT_FALSE(parse_engine_metrics("<html>not metrics</html>", "vllm").usable());
}

// Random bytes never crash the parser (run under ASan/UBSan).
TEST(PrometheusText, SurvivesGarbage) {
  std::mt19937 rng(7);
  std::string alphabet = "vlm:_{}\"\\= \n\t0123456789.eE+-#NaInf";
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 200, ' ');
    for (auto& c : s) c = alphabet[rng() % alphabet.size()];
    auto m = parse_engine_metrics(s, i % 2 ? "vllm" : "sglang");
    EXPECT_GE(m.kv_cache_usage, 0.0);
    EXPECT_LE(m.kv_cache_usage, 1.0);
  }
}

}  // namespace
}  // namespace sluice::datalayer

namespace sluice::datalayer {
namespace {

TEST(PrometheusText, LoraAndCacheInfoFromLabels) {
  auto m = parse_engine_metrics(
      "# TYPE vllm:lora_requests_info gauge\n"
      "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"old\",waiting_lora_adapters="
      "\"\"} 1.7e9\n"
      "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql-lora, chat-lora\","
      "waiting_lora_adapters=\"tools-lora\"} 1.8e9\n"
      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"2048\"} 1\n"
      "vllm:num_requests_waiting 0\n",
      "vllm");
  EXPECT_EQ(m.active_models,
            (std::vector<std::string>{"sql-lora", "chat-lora"}));  // the latest series
  EXPECT_EQ(m.waiting_models, (std::vector<std::string>{"tools-lora"}));
  EXPECT_EQ(m.max_lora, 4);
  EXPECT_EQ(m.cache_block_size, 16);
  EXPECT_EQ(m.cache_num_gpu_blocks, 2048u);
}

TEST(PrometheusText, EmptyLoraInfoAndMissingMetrics) {
  auto m = parse_engine_metrics(
      "vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\"} 5\n", "vllm");
  EXPECT_TRUE(m.active_models.empty());
  EXPECT_TRUE(m.waiting_models.empty());
  EXPECT_EQ(m.max_lora, 0);
  EXPECT_FALSE(m.usable());  // no queue, batch or KV figure: nothing to schedule on
}

TEST(PrometheusText, HugeLineAndInfinities) {
  std::string huge =
      "vllm:num_requests_waiting{model_name=\"" + std::string(4 << 20, 'a') + "\"} 3\n";
  auto m =
      parse_engine_metrics(huge +
                               "vllm:num_requests_running +Inf\nvllm:kv_cache_usage_perc -Inf\n"
                               "vllm:num_requests_running 1e400\n",
                           "vllm");
  EXPECT_EQ(m.waiting, 3);  // long, but well-formed
  EXPECT_FALSE(m.has_running);
  EXPECT_FALSE(m.has_kv);
  EXPECT_EQ(m.bad_lines, 3u);
}

}  // namespace
}  // namespace sluice::datalayer
