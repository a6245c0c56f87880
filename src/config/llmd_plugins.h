// The plugin types llm-d-router registers that sluice does not build: each
// with what it needs that sluice has not got, and what to use instead. A
// config naming any of them fails to start with one message that lists
// them all (config.cc, read_plugins); docs/configuration.md lists every
// llm-d type, supported or not, and a test holds the two together.
// The types sluice does build are kBuiltinExtensionTypes
// (include/sluice/extensions.h).
#pragma once

#include <string_view>

namespace sluice::config {

enum class LlmdSupport : unsigned char {
  kNotYet,         // needs a part sluice does not have yet
  kNotApplicable,  // belongs to a deployment sluice is not (Kubernetes, a test harness)
};

struct LlmdPluginType {
  std::string_view type;
  LlmdSupport support;
  std::string_view needs;    // what it needs that sluice has not got
  std::string_view instead;  // the closest supported alternative
};

inline constexpr LlmdPluginType kUnsupportedLlmdPlugins[] = {
    // A tokenizer.
    {"tokenizer", LlmdSupport::kNotYet, "a tokenizer sidecar on a unix socket",
     "sluice's own input-token estimate (no plugin needed)"},
    {"token-producer", LlmdSupport::kNotYet, "a tokenizer sidecar on a unix socket",
     "sluice's own input-token estimate (no plugin needed)"},
    // The engines' KV-cache events.
    {"precise-prefix-cache-producer", LlmdSupport::kNotYet,
     "the engines' KV-cache events over ZMQ, and a tokenizer",
     "approx-prefix-cache-producer with prefix-cache-scorer"},
    {"precise-prefix-cache-scorer", LlmdSupport::kNotYet,
     "the engines' KV-cache events over ZMQ, and a tokenizer", "prefix-cache-scorer"},
    {"burst-prefix-cache-producer", LlmdSupport::kNotYet,
     "llm-d's burst prefix estimator (not ported yet)", "approx-prefix-cache-producer"},
    {"p2p-source-producer", LlmdSupport::kNotYet, "KV-cache transfer between engines (P2P)",
     "prefix-cache-scorer"},
    {"mm-embeddings-cache-producer", LlmdSupport::kNotYet,
     "multimodal embeddings parsed from the request", "prefix-cache-scorer"},
    {"mm-embeddings-cache-scorer", LlmdSupport::kNotYet,
     "multimodal embeddings parsed from the request", "prefix-cache-scorer"},
    // A trained latency predictor.
    {"predicted-latency-producer", LlmdSupport::kNotYet,
     "a trained latency predictor (llm-d's training and prediction sidecars)",
     "queue-scorer with kv-cache-utilization-scorer; slo-deadline-ordering-policy for TTFT "
     "objectives"},
    {"latency-scorer", LlmdSupport::kNotYet, "a trained latency predictor",
     "queue-scorer with kv-cache-utilization-scorer"},
    {"latency-slo-admitter", LlmdSupport::kNotYet, "a trained latency predictor",
     "flow control's TTLs and slo-deadline-ordering-policy"},
    {"slo-headroom-tier-filter", LlmdSupport::kNotYet, "a trained latency predictor",
     "saturation-aware dispatch (featureGates: [flowControl])"},
    // Other wire protocols.
    {"anthropic-parser", LlmdSupport::kNotYet, "the Anthropic Messages API",
     "passthrough-parser (forwarded without parsing)"},
    {"vllmgrpc-parser", LlmdSupport::kNotYet, "gRPC towards the engines",
     "vLLM's OpenAI-compatible HTTP server"},
    {"vllmhttp-parser", LlmdSupport::kNotYet, "vLLM's /inference/v1/generate (token ids)",
     "passthrough-parser (forwarded without parsing)"},
    {"sglanghttp-parser", LlmdSupport::kNotYet, "SGLang's native /generate",
     "passthrough-parser (forwarded without parsing)"},
    {"vertexai-parser", LlmdSupport::kNotYet, "the Vertex AI gRPC API",
     "the OpenAI API (openai-parser)"},
    // Plugins not ported yet.
    {"session-affinity-filter", LlmdSupport::kNotYet, "a filter form of session affinity",
     "session-affinity-scorer with a high weight"},
    {"header-label-affinity-scorer", LlmdSupport::kNotYet, "not ported yet",
     "by-label-selector filter"},
    {"header-profile-handler", LlmdSupport::kNotYet, "not ported yet",
     "single-profile-handler or disagg-profile-handler"},
    {"endpoint-attribute-filter", LlmdSupport::kNotYet, "not ported yet",
     "by-label or by-label-selector on endpoint labels"},
    {"endpoint-attribute-scorer", LlmdSupport::kNotYet, "not ported yet",
     "by-label-selector on endpoint labels"},
    {"utilization-filter", LlmdSupport::kNotYet, "not ported yet",
     "saturation-aware dispatch (featureGates: [flowControl])"},
    {"always-disagg-multimodal-decider", LlmdSupport::kNotYet, "encoder endpoints (the E of E/P/D)",
     "prefix-based-pd-decider"},
    {"encode-filter", LlmdSupport::kNotYet, "encoder endpoints (the E of E/P/D)",
     "prefill-filter and decode-filter"},
    {"dcgm-data-source", LlmdSupport::kNotYet, "GPU telemetry from NVIDIA's DCGM exporter",
     "the engines' own /metrics (scraped already)"},
    {"dcgm-extractor", LlmdSupport::kNotYet, "GPU telemetry from NVIDIA's DCGM exporter",
     "the engines' own /metrics (scraped already)"},
    {"sheddable-eviction-filter", LlmdSupport::kNotYet, "llm-d's pluggable eviction",
     "flowControl.eviction (sheddable bands only, built in)"},
    {"priority-then-time-eviction-order-policy", LlmdSupport::kNotYet, "llm-d's pluggable eviction",
     "flowControl.eviction (lowest band, newest first, built in)"},
    {"request-attribute-reporter", LlmdSupport::kNotYet, "not ported yet",
     "the access log (server.accessLog)"},
    {"session-id-producer", LlmdSupport::kNotYet, "not ported yet",
     "x-session-token with session-affinity-scorer"},
    {"file-discovery", LlmdSupport::kNotYet, "llm-d's discovery file format",
     "server.endpointsFile (watched)"},
    {"multicluster-file-discovery", LlmdSupport::kNotYet, "several clusters behind one gateway",
     "one sluice per cluster, or endpoints of every cluster in one pool"},
    {"multicluster-metrics-data-source", LlmdSupport::kNotYet,
     "several clusters behind one gateway", "the engines' own /metrics"},
    {"multicluster-metrics-extractor", LlmdSupport::kNotYet, "several clusters behind one gateway",
     "the engines' own /metrics"},
    {"multicluster-session-affinity-filter", LlmdSupport::kNotYet,
     "several clusters behind one gateway", "session-affinity-scorer"},
    {"multicluster-kv-cache-utilization-scorer", LlmdSupport::kNotYet,
     "several clusters behind one gateway", "kv-cache-utilization-scorer"},
    {"multicluster-queue-scorer", LlmdSupport::kNotYet, "several clusters behind one gateway",
     "queue-scorer"},
    {"multicluster-prefix-cache-scorer", LlmdSupport::kNotYet,
     "several clusters behind one gateway", "prefix-cache-scorer"},
    {"multicluster-approx-prefix-cache-producer", LlmdSupport::kNotYet,
     "several clusters behind one gateway", "approx-prefix-cache-producer"},
    // Kubernetes, llm-d's own replicas, llm-d's test harness.
    {"disaggregatedset-rollout-screener", LlmdSupport::kNotApplicable,
     "the objects of llm-d's DisaggregatedSet Kubernetes controller",
     "by-label-selector on endpoint labels"},
    {"disaggregatedset-rollout-pod-extractor", LlmdSupport::kNotApplicable,
     "the objects of llm-d's DisaggregatedSet Kubernetes controller", "endpoint labels"},
    {"k8s-notification-source", LlmdSupport::kNotApplicable, "the Kubernetes API",
     "dns: endpoints or server.endpointsFile"},
    {"local-syncer", LlmdSupport::kNotApplicable, "llm-d's cross-replica syncer",
     "redis: (sluice's fleet)"},
    {"cross-replica-publisher", LlmdSupport::kNotApplicable, "llm-d's cross-replica syncer",
     "redis: (sluice's fleet)"},
    {"header-based-testing-filter", LlmdSupport::kNotApplicable, "llm-d's test harness", "none"},
    {"destination-endpoint-served-verifier", LlmdSupport::kNotApplicable, "llm-d's test harness",
     "none"},
};

// The entry for an llm-d type sluice does not build, or null.
constexpr const LlmdPluginType* unsupported_llmd_plugin(std::string_view type) {
  for (const auto& e : kUnsupportedLlmdPlugins)
    if (e.type == type) return &e;
  return nullptr;
}

}  // namespace sluice::config
