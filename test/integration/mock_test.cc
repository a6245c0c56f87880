// sluice-mock on its own: the OpenAI surface, metrics names, batching,
// determinism.
#include <nlohmann/json.hpp>
#include <thread>

#include "harness.h"

namespace sluice::test {
namespace {

using nlohmann::json;
const std::string kHost = "127.0.0.1";

TEST(Mock, VllmMetricsAndHealth) {
  auto mock = start_mock({"--kv-capacity-tokens", "1600"});
  HttpClient c(kHost, mock->port());
  EXPECT_EQ(c.request("GET", "/health").status, 200);
  auto m = c.request("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name : {"vllm:num_requests_waiting{", "vllm:num_requests_running{",
                           "vllm:kv_cache_usage_perc{", "vllm:cache_config_info{"}) {
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  }
  EXPECT_NE(m.body.find("num_gpu_blocks=\"100\""), std::string::npos);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Mock, SglangMetricNames) {
  auto mock = start_mock({"--engine", "sglang"});
  auto body = HttpClient(kHost, mock->port()).request("GET", "/metrics").body;
  for (const char* name :
       {"sglang:num_queue_reqs{", "sglang:num_running_reqs{", "sglang:token_usage{"})
    EXPECT_NE(body.find(name), std::string::npos) << name;
  EXPECT_EQ(body.find("vllm:"), std::string::npos);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Mock, BatchIsBoundedAndTheRestWaits) {
  auto mock = start_mock({"--max-running", "1", "--decode-ms-per-token", "10"});
  const std::string running = "vllm:num_requests_running{model_name=\"mock-model\"}";
  const std::string waiting = "vllm:num_requests_waiting{model_name=\"mock-model\"}";
  Response first, second;
  // The first runs ~2 s (200 tokens at 10 ms): the second waits behind it
  // for all of that, however late it arrives or is looked at.
  std::thread t1([&] {
    first = HttpClient(kHost, mock->port()).post_json("/v1/completions", completion_body(200));
  });
  ASSERT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), running) == 1; }));
  std::thread t2([&] {
    second = HttpClient(kHost, mock->port()).post_json("/v1/completions", completion_body(5));
  });
  EXPECT_TRUE(eventually([&] { return scrape_metric(kHost, mock->port(), waiting) == 1; }));
  EXPECT_EQ(scrape_metric(kHost, mock->port(), running), 1);
  t1.join();
  t2.join();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Mock, DeterministicUnderSeed) {
  auto a = start_mock({"--seed", "42", "--decode-ms-per-token", "0"});
  auto b = start_mock({"--seed", "42", "--decode-ms-per-token", "0"});
  auto c = start_mock({"--seed", "43", "--decode-ms-per-token", "0"});
  auto text = [&](Process& p) {
    auto r = HttpClient(kHost, p.port()).post_json("/v1/completions", completion_body(12));
    return json::parse(r.body)["choices"][0]["text"].get<std::string>();
  };
  EXPECT_EQ(text(*a), text(*b));
  EXPECT_EQ(text(*a), text(*a));
  EXPECT_NE(text(*a), text(*c));
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
  EXPECT_EQ(c->stop(), 0);
}

TEST(Mock, PrefixCacheHitsAreReported) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  std::string prompt(640, 'p');  // 10 blocks
  HttpClient c(kHost, mock->port());
  auto first = json::parse(c.post_json("/v1/completions", completion_body(1, false, prompt)).body);
  auto second = json::parse(c.post_json("/v1/completions", completion_body(1, false, prompt)).body);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], 160);
  EXPECT_EQ(mock->stop(), 0);
}

TEST(Mock, OutputLengthOverride) {
  auto mock = start_mock({"--decode-ms-per-token", "0"});
  auto r = HttpClient(kHost, mock->port())
               .post_json("/v1/completions", completion_body(50), {{"x-mock-output-tokens", "7"}});
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 7);
  EXPECT_EQ(mock->stop(), 0);
}

// vLLM's rule: a non-zero "priority" needs --scheduling-policy priority;
// the mock reports the value it took.
TEST(Mock, PriorityNeedsPrioritySchedulingAsInVllm) {
  const std::string with = R"({"model":"mock-model","prompt":"x","max_tokens":1,"priority":3})";
  auto fcfs = start_mock({"--decode-ms-per-token", "0"});
  HttpClient c(kHost, fcfs->port());
  auto r = c.post_json("/v1/completions", with);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Got priority 3 but Priority scheduling is not enabled."),
            std::string::npos)
      << r.body;
  r = c.post_json("/v1/completions",
                  R"({"model":"mock-model","prompt":"x","max_tokens":1,"priority":0})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("x-mock-priority"), "0");
  EXPECT_EQ(fcfs->stop(), 0);

  auto prio = start_mock({"--decode-ms-per-token", "0", "--scheduling-policy", "priority"});
  HttpClient p(kHost, prio->port());
  r = p.post_json("/v1/completions", with);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-mock-priority"), "3");
  r = p.post_json("/v1/completions",
                  R"({"model":"mock-model","prompt":"x","max_tokens":1,"priority":"high"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(prio->stop(), 0);
}

}  // namespace
}  // namespace sluice::test
