// Reads a model server's /metrics (Prometheus text format 0.0.4) into the
// few numbers flow control and scheduling use, by engine (DESIGN.md §3.4).
// Untrusted input: never throws, never crashes; bad lines are skipped and
// counted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::datalayer {

struct EngineMetrics {
  double waiting = 0;         // requests queued on the server
  double running = 0;         // requests in its batch
  double kv_cache_usage = 0;  // 0..1
  // vllm:lora_requests_info (labels running_lora_adapters,
  // waiting_lora_adapters, max_lora) and vllm:cache_config_info (labels
  // block_size, num_gpu_blocks).
  std::vector<std::string> active_models;
  std::vector<std::string> waiting_models;
  int max_lora = 0;
  int cache_block_size = 0;
  std::uint64_t cache_num_gpu_blocks = 0;
  bool has_waiting = false;
  bool has_running = false;
  bool has_kv = false;
  std::uint64_t bad_lines = 0;
  bool usable() const { return has_waiting || has_running || has_kv; }
};

// `engine`: vllm | sglang | trtllm-serve. Series of one metric (e.g. per
// model_name) are summed for counts, and the largest KV usage is taken.
EngineMetrics parse_engine_metrics(std::string_view text, std::string_view engine);

}  // namespace sluice::datalayer
