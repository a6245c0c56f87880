// Reads a model server's /metrics (Prometheus text format 0.0.4) into the
// few numbers flow control and scheduling use, by engine (DESIGN.md §3.4).
// Untrusted input: never throws, never crashes; bad lines are skipped and
// counted.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::datalayer {

struct EngineMetrics {
  double waiting = 0;         // requests queued on the server
  double running = 0;         // requests in its batch
  double kv_cache_usage = 0;  // 0..1
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
