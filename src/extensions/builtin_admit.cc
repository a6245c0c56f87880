// Factories of the admission and fairness plugins of llm-d.
#include "extensions/builtin_admit.h"

#include <cstdint>
#include <memory>
#include <random>

#include "flowcontrol/probabilistic_admitter.h"
#include "flowcontrol/program_aware_fairness.h"

namespace sluice {

namespace {

using flowcontrol::Admitter;
using flowcontrol::ProbabilisticAdmitter;
using flowcontrol::ProbabilisticAdmitterParams;

// A parameter that must be greater than zero.
double positive(PluginParams& p, const char* key, double fallback) {
  auto v = p.number(key);
  if (!v) return fallback;
  if (!(*v > 0)) p.fail(key, "must be greater than zero");
  return *v;
}

// probabilistic-admitter: llm-d's parameters and defaults; validation as
// llm-d's (every one > 0), and kvCacheUtilThreshold at most 1 (a fraction
// of the KV cache: above 1 it could never be reached).
std::unique_ptr<Admitter> make_probabilistic_admitter(PluginParams& p) {
  ProbabilisticAdmitterParams a;
  if (auto q = p.integer("queueDepthThreshold", INT64_MIN, INT64_MAX)) {
    if (*q <= 0) p.fail("queueDepthThreshold", "must be greater than zero");
    a.queue_depth_threshold = static_cast<double>(*q);
  }
  if (auto kv = p.number("kvCacheUtilThreshold")) {
    if (!(*kv > 0 && *kv <= 1)) p.fail("kvCacheUtilThreshold", "must be in (0, 1]");
    a.kv_cache_util_threshold = *kv;
  }
  a.power = positive(p, "power", a.power);
  a.k = positive(p, "k", a.k);
  p.finish();
  return std::make_unique<ProbabilisticAdmitter>(a, std::uint64_t{std::random_device{}()});
}

}  // namespace

void add_admit_plugins(ExtensionRegistry& r) {
  r.add<Admitter>(ExtensionKind::kAdmitter, std::string(ProbabilisticAdmitter::kType),
                  make_probabilistic_admitter);
  // Its parameters are read with the config (flowControl's fairness
  // parameters, one set for every band) and arrive in FairnessParams.
  r.add<flowcontrol::FairnessPolicy>(
      ExtensionKind::kFairnessPolicy, std::string(flowcontrol::ProgramAwareFairness::kType),
      [](const flowcontrol::FairnessParams& p) {
        return std::make_unique<flowcontrol::ProgramAwareFairness>(p.program_aware);
      });
}

}  // namespace sluice
