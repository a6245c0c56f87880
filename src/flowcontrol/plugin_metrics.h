// llm-d's per-plugin metrics of the scheduler's plugins, copied on the
// dispatcher thread (the plugins' one writer) into plain values that the
// admin thread renders: the in-flight load of each inflight-load-producer
// (llm_d_epp_inflight_requests, _tokens) and the decisions of each
// disagg-profile-handler (llm_d_epp_disagg_decision_total). Bounded: one
// row per endpoint slot, per model up to the handler's cap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::flowcontrol {

class Controller;

struct PluginMetricsCopy {
  struct InFlight {
    std::string producer;                         // the plugin's instance name
    std::vector<std::uint64_t> requests, tokens;  // by endpoint slot
  };
  struct Decision {
    std::string plugin_name, plugin_type, model;
    std::uint64_t decode_only = 0, prefill_decode = 0;
  };
  std::vector<InFlight> inflight;
  std::vector<Decision> decisions;  // by plugin, then model name
  bool disagg = false;              // a disagg-profile-handler is configured
};

// On the dispatcher thread: the running scheduler's plugins (a reload's new
// scheduler starts from zero, as its plugin timings do).
void copy_plugin_metrics(Controller& c, PluginMetricsCopy& out);

}  // namespace sluice::flowcontrol
