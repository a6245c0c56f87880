#include "datalayer/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace sluice::datalayer {
namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

// One sample line: name, optional {labels}, value, optional timestamp.
bool parse_sample(std::string_view line, std::string_view& name, std::string_view& labels,
                  double& value) {
  std::size_t i = 0;
  if (i >= line.size() || !name_start(line[i])) return false;
  while (i < line.size() && name_char(line[i])) ++i;
  name = line.substr(0, i);
  labels = {};
  if (i < line.size() && line[i] == '{') {
    // Skip labels, honouring quoted values with escapes.
    const std::size_t open = i;
    bool quoted = false;
    for (++i; i < line.size(); ++i) {
      char c = line[i];
      if (quoted) {
        if (c == '\\')
          ++i;
        else if (c == '"')
          quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '}') {
        break;
      }
    }
    if (i >= line.size()) return false;
    labels = line.substr(open + 1, i - open - 1);
    ++i;
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::size_t end = i;
  while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
  std::string_view v = line.substr(i, end - i);
  if (v.empty()) return false;
  if (v == "NaN" || v == "+Inf" || v == "-Inf" || v == "Inf") return false;  // useless here
  // from_chars for double is available in libstdc++ 12.
  auto r = std::from_chars(v.data(), v.data() + v.size(), value);
  return r.ec == std::errc() && r.ptr == v.data() + v.size() && std::isfinite(value);
}

// The value of label `key` in a label set `a="x",b="y"` (escapes kept
// as-is: the values read here never contain them). Empty if absent.
std::string_view label_value(std::string_view labels, std::string_view key) {
  std::size_t i = 0;
  while (i < labels.size()) {
    while (i < labels.size() && (labels[i] == ',' || labels[i] == ' ')) ++i;
    const std::size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"') return {};
    std::string_view k = labels.substr(i, eq - i);
    std::size_t j = eq + 2;
    while (j < labels.size() && labels[j] != '"') j += labels[j] == '\\' ? 2 : 1;
    if (j >= labels.size()) return {};
    if (k == key) return labels.substr(eq + 2, j - eq - 2);
    i = j + 1;
  }
  return {};
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    auto c = v.find(',');
    std::string_view item = v.substr(0, c);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
  return out;
}

template <class T>
T to_number(std::string_view v) {
  T out{};
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

}  // namespace

EngineMetrics parse_engine_metrics(std::string_view text, std::string_view engine) {
  std::string_view waiting_name, running_name, kv_name, kv_fallback;
  if (engine == "sglang") {
    waiting_name = "sglang:num_queue_reqs";
    running_name = "sglang:num_running_reqs";
    kv_name = "sglang:token_usage";
  } else if (engine == "trtllm-serve") {
    waiting_name = "trtllm_num_requests_waiting";
    running_name = "trtllm_num_requests_running";
    kv_name = "trtllm_kv_cache_utilization";
  } else {
    waiting_name = "vllm:num_requests_waiting";
    running_name = "vllm:num_requests_running";
    kv_name = "vllm:kv_cache_usage_perc";
    kv_fallback = "vllm:gpu_cache_usage_perc";  // older vLLM
  }
  EngineMetrics m;
  double lora_latest = -1;
  double kv_old = 0;
  bool has_kv_old = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    std::string_view name, labels;
    double value = 0;
    if (!parse_sample(line, name, labels, value)) {
      ++m.bad_lines;
      continue;
    }
    if (name == waiting_name) {
      m.waiting += value;
      m.has_waiting = true;
    } else if (name == running_name) {
      m.running += value;
      m.has_running = true;
    } else if (name == kv_name) {
      m.kv_cache_usage = std::max(m.has_kv ? m.kv_cache_usage : 0.0, value);
      m.has_kv = true;
    } else if (name == "vllm:lora_requests_info") {
      // One series per change, valued with its time: the latest wins.
      if (value > lora_latest) {
        lora_latest = value;
        m.active_models = split_list(label_value(labels, "running_lora_adapters"));
        m.waiting_models = split_list(label_value(labels, "waiting_lora_adapters"));
        m.max_lora = to_number<int>(label_value(labels, "max_lora"));
      }
    } else if (name == "vllm:cache_config_info") {
      m.cache_block_size = to_number<int>(label_value(labels, "block_size"));
      m.cache_num_gpu_blocks = to_number<std::uint64_t>(label_value(labels, "num_gpu_blocks"));
    } else if (!kv_fallback.empty() && name == kv_fallback) {
      kv_old = std::max(kv_old, value);
      has_kv_old = true;
    }
  }
  if (!m.has_kv && has_kv_old) {
    m.kv_cache_usage = kv_old;
    m.has_kv = true;
  }
  m.kv_cache_usage = std::clamp(m.kv_cache_usage, 0.0, 1.0);
  return m;
}

}  // namespace sluice::datalayer
