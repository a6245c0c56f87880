// One typed registry for every extension sluice builds by name: the
// flow-control policies (ordering, fairness, displacement, usage limit), the
// saturation detectors and the scheduling plugins (GIE's `plugins:` types).
//
// Two parts, one list:
//   - kBuiltinExtensionTypes: every in-tree type and its kind. It is data,
//     so the config loader (the lowest layer, which cannot link the
//     factories) validates types and names them in its errors from it, and
//     so do the admin plane's messages.
//   - ExtensionRegistry: the factories, typed by interface (a factory's
//     signature is fixed by the interface it builds, so a fairness policy
//     cannot be asked of an ordering factory). builtin_extensions() holds
//     the in-tree ones; it refuses a type the list does not declare, or
//     declares with another kind, and on first use checks that every type
//     the list declares with a buildable kind has its factory.
// Factories run at startup or reload only (they may throw config errors);
// nothing here is called on the data plane.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/flowcontrol/admitter.h"
#include "sluice/flowcontrol/policies.h"
#include "sluice/plugin.h"

namespace sluice {

namespace config {
struct SaturationDetectorSpec;
struct UsageLimitSpec;
}  // namespace config

enum class ExtensionKind : std::uint8_t {
  kOrderingPolicy,
  kFairnessPolicy,
  kDisplacementPolicy,
  kSaturationDetector,
  kUsageLimitPolicy,
  kDataProducer,
  kFilter,
  kScorer,
  kPicker,
  kPdDecider,
  kProfileHandler,
  // Decides whether an arriving request may be queued (llm-d's Admitter).
  kAdmitter,
  // Accepted in `plugins:` for compatibility; sluice does their job built
  // in (request parsing, P/D headers, metrics collection), nothing to build.
  kBuiltIn,
};

// "ordering policy", "scorer", ... (for messages).
constexpr std::string_view kind_name(ExtensionKind k) {
  switch (k) {
    case ExtensionKind::kOrderingPolicy:
      return "ordering policy";
    case ExtensionKind::kFairnessPolicy:
      return "fairness policy";
    case ExtensionKind::kDisplacementPolicy:
      return "displacement policy";
    case ExtensionKind::kSaturationDetector:
      return "saturation detector";
    case ExtensionKind::kUsageLimitPolicy:
      return "usage limit policy";
    case ExtensionKind::kDataProducer:
      return "data producer";
    case ExtensionKind::kFilter:
      return "filter";
    case ExtensionKind::kScorer:
      return "scorer";
    case ExtensionKind::kPicker:
      return "picker";
    case ExtensionKind::kPdDecider:
      return "P/D decider";
    case ExtensionKind::kProfileHandler:
      return "profile handler";
    case ExtensionKind::kAdmitter:
      return "admitter";
    case ExtensionKind::kBuiltIn:
      return "built-in plugin";
  }
  return "extension";
}

struct ExtensionType {
  std::string_view type;
  ExtensionKind kind;
  // May be declared under `plugins:` (displacement policies are chosen by
  // flowControl.displacementPolicy instead).
  bool declarable = true;
};

inline constexpr ExtensionType kBuiltinExtensionTypes[] = {
    {"fcfs-ordering-policy", ExtensionKind::kOrderingPolicy},
    {"edf-ordering-policy", ExtensionKind::kOrderingPolicy},
    {"slo-deadline-ordering-policy", ExtensionKind::kOrderingPolicy},
    {"global-strict-fairness-policy", ExtensionKind::kFairnessPolicy},
    {"round-robin-fairness-policy", ExtensionKind::kFairnessPolicy},
    {"vtc-fairness-policy", ExtensionKind::kFairnessPolicy},
    {"lowest-band-newest-first", ExtensionKind::kDisplacementPolicy, false},
    {"utilization-detector", ExtensionKind::kSaturationDetector},
    {"concurrency-detector", ExtensionKind::kSaturationDetector},
    {"static-usage-limit-policy", ExtensionKind::kUsageLimitPolicy},
    {"priority-holdback-policy", ExtensionKind::kUsageLimitPolicy},
    {"soft-reflective-ceiling-policy", ExtensionKind::kUsageLimitPolicy},
    {"approx-prefix-cache-producer", ExtensionKind::kDataProducer},
    {"by-label", ExtensionKind::kFilter},
    {"by-label-selector", ExtensionKind::kFilter},
    {"label-selector-filter", ExtensionKind::kFilter},
    {"prefill-filter", ExtensionKind::kFilter},
    {"decode-filter", ExtensionKind::kFilter},
    {"queue-scorer", ExtensionKind::kScorer},
    {"running-requests-size-scorer", ExtensionKind::kScorer},
    {"kv-cache-utilization-scorer", ExtensionKind::kScorer},
    {"lora-affinity-scorer", ExtensionKind::kScorer},
    {"prefix-cache-scorer", ExtensionKind::kScorer},
    {"session-affinity-scorer", ExtensionKind::kScorer},
    {"in-flight-requests-scorer", ExtensionKind::kScorer},
    // load (issue 40): llm-d's load and prefix plugins, src/extensions/builtin_load.cc
    {"inflight-load-producer", ExtensionKind::kDataProducer},
    {"token-load-scorer", ExtensionKind::kScorer},
    {"active-request-scorer", ExtensionKind::kScorer},
    {"load-aware-scorer", ExtensionKind::kScorer},
    {"no-hit-lru-scorer", ExtensionKind::kScorer},
    {"prefix-cache-affinity-filter", ExtensionKind::kFilter},
    {"max-score-picker", ExtensionKind::kPicker},
    {"random-picker", ExtensionKind::kPicker},
    {"weighted-random-picker", ExtensionKind::kPicker},
    {"prefix-based-pd-decider", ExtensionKind::kPdDecider},
    {"single-profile-handler", ExtensionKind::kProfileHandler},
    {"disagg-profile-handler", ExtensionKind::kProfileHandler},
    // issue 40, prefill/decode and topology (src/extensions/builtin_pd.cc):
    {"always-disagg-pd-decider", ExtensionKind::kPdDecider},
    {"context-length-aware", ExtensionKind::kScorer},
    {"topology-extractor", ExtensionKind::kDataProducer},
    {"topology-affinity-filter", ExtensionKind::kFilter},
    {"topology-affinity-scorer", ExtensionKind::kScorer},
    // issue 40, data parallelism (src/extensions/builtin_dp.cc):
    {"data-parallel-profile-handler", ExtensionKind::kProfileHandler},
    {"openai-parser", ExtensionKind::kBuiltIn},
    {"disagg-headers-handler", ExtensionKind::kBuiltIn},
    {"metrics-data-source", ExtensionKind::kBuiltIn},
    {"core-metrics-extractor", ExtensionKind::kBuiltIn},
    // llm-d v1.0's document (issue 40): the parser that forwards bodies
    // unread (requestHandler.parsers), and the data-layer plugins whose job
    // sluice does built in (endpoint discovery from its file and DNS, the
    // /v1/models catalogue it polls), and the P/D headers' former name.
    {"passthrough-parser", ExtensionKind::kBuiltIn},
    {"endpoint-notification-source", ExtensionKind::kBuiltIn},
    {"models-data-source", ExtensionKind::kBuiltIn},
    {"models-data-extractor", ExtensionKind::kBuiltIn},
    {"prefill-header-handler", ExtensionKind::kBuiltIn},
    // admit (issue 40, item 3): admission and fairness plugins of llm-d.
    {"probabilistic-admitter", ExtensionKind::kAdmitter},
    {"program-aware-fairness", ExtensionKind::kFairnessPolicy},
    {"agent-identity", ExtensionKind::kBuiltIn},  // read by the proxy (identity)
};

// The in-tree type's entry, or null.
constexpr const ExtensionType* builtin_extension(std::string_view type) {
  for (const auto& e : kBuiltinExtensionTypes)
    if (e.type == type) return &e;
  return nullptr;
}

constexpr bool is_builtin(std::string_view type, ExtensionKind kind) {
  const ExtensionType* e = builtin_extension(type);
  return e && e->kind == kind;
}

// "a, b or c": the in-tree types of `kind`, for messages.
inline std::string builtin_types_of(ExtensionKind kind) {
  std::vector<std::string_view> names;
  for (const auto& e : kBuiltinExtensionTypes)
    if (e.kind == kind) names.push_back(e.type);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

// The factory signature of each interface, and the kinds it builds.
template <class Interface>
struct ExtensionTraits;

template <>
struct ExtensionTraits<flowcontrol::OrderingPolicy> {
  using Factory = std::function<std::unique_ptr<flowcontrol::OrderingPolicy>()>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kOrderingPolicy; }
};
template <>
struct ExtensionTraits<flowcontrol::FairnessPolicy> {
  using Factory = std::function<std::unique_ptr<flowcontrol::FairnessPolicy>(
      const flowcontrol::FairnessParams&)>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kFairnessPolicy; }
};
template <>
struct ExtensionTraits<flowcontrol::DisplacementPolicy> {
  using Factory = std::function<std::unique_ptr<flowcontrol::DisplacementPolicy>()>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kDisplacementPolicy; }
};
template <>
struct ExtensionTraits<flowcontrol::SaturationDetector> {
  using Factory = std::function<std::unique_ptr<flowcontrol::SaturationDetector>(
      const config::SaturationDetectorSpec&)>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kSaturationDetector; }
};
template <>
struct ExtensionTraits<flowcontrol::UsageLimitPolicy> {
  using Factory =
      std::function<std::unique_ptr<flowcontrol::UsageLimitPolicy>(const config::UsageLimitSpec&)>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kUsageLimitPolicy; }
};
template <>
struct ExtensionTraits<flowcontrol::Admitter> {
  using Factory = std::function<std::unique_ptr<flowcontrol::Admitter>(PluginParams&)>;
  static constexpr bool builds(ExtensionKind k) { return k == ExtensionKind::kAdmitter; }
};
// Scheduling plugins (GIE's): built from their `parameters:` and the
// plugins built before them.
template <>
struct ExtensionTraits<Plugin> {
  using Factory = PluginFactory;
  static constexpr bool builds(ExtensionKind k) {
    return k == ExtensionKind::kDataProducer || k == ExtensionKind::kFilter ||
           k == ExtensionKind::kScorer || k == ExtensionKind::kPicker ||
           k == ExtensionKind::kPdDecider || k == ExtensionKind::kProfileHandler;
  }
};

class ExtensionRegistry {
 public:
  // Registers `type` as a `kind` built by `factory` for interface I. A kind
  // I does not build, or a type registered twice, is a programming error.
  template <class I>
  void add(ExtensionKind kind, std::string type, typename ExtensionTraits<I>::Factory factory) {
    if (!ExtensionTraits<I>::builds(kind))
      throw std::logic_error("extension '" + type + "': a " + std::string(kind_name(kind)) +
                             " is not built by this interface");
    if (!factory) throw std::logic_error("extension '" + type + "' has no factory");
    if (!entries_.emplace(type, Entry{kind, std::any(std::move(factory))}).second)
      throw std::logic_error("extension '" + type + "' registered twice");
  }

  // Builds `type` through I's factory: null when `type` is not registered
  // or is not something I builds. Factories may throw config errors.
  template <class I, class... Args>
  std::unique_ptr<I> build(std::string_view type, Args&&... args) const {
    const auto* f = factory<I>(type);
    if (!f) return nullptr;
    return (*f)(std::forward<Args>(args)...);
  }

  template <class I>
  const typename ExtensionTraits<I>::Factory* factory(std::string_view type) const {
    auto it = entries_.find(type);
    if (it == entries_.end() || !ExtensionTraits<I>::builds(it->second.kind)) return nullptr;
    return std::any_cast<typename ExtensionTraits<I>::Factory>(&it->second.factory);
  }

  std::optional<ExtensionKind> kind_of(std::string_view type) const {
    auto it = entries_.find(type);
    if (it == entries_.end()) return std::nullopt;
    return it->second.kind;
  }

  // Registered types of `kind`, sorted.
  std::vector<std::string> types(ExtensionKind kind) const {
    std::vector<std::string> out;
    for (const auto& [t, e] : entries_)
      if (e.kind == kind) out.push_back(t);
    return out;
  }

  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    ExtensionKind kind;
    std::any factory;  // ExtensionTraits<I>::Factory of the interface that builds `kind`
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

// The in-tree extensions, built once (thread-safe) on first use. Throws
// std::logic_error at that first use if the registry and
// kBuiltinExtensionTypes disagree (a build defect, caught by the unit tests).
const ExtensionRegistry& builtin_extensions();

}  // namespace sluice
