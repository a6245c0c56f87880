// Per-request statistics of one I/O thread: written only by that thread,
// copied on that thread when /metrics is scraped (the admin plane posts a
// snapshot task to each I/O thread and merges the copies). No atomics, no lock.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flowcontrol/latency_histogram.h"

namespace sluice::observe {

class MetricsText;

// GIE's inference_objective_* families, by model.
struct ModelStats {
  std::uint64_t requests = 0;
  std::unordered_map<std::string, std::uint64_t> errors;  // by error code (a bounded set)
  flowcontrol::LatencyHistogram duration;
  // Received to first response body byte, served requests (llm-d's
  // request_ttft_seconds), by streaming: [0] a whole answer, [1] a stream.
  std::array<flowcontrol::LatencyHistogram, 2> ttft;
  flowcontrol::TokenHistogram input_tokens;
  flowcontrol::TokenHistogram output_tokens;
  std::int64_t running = 0;
};

enum class UpstreamError : std::uint8_t {
  kConnect,         // refused, unreachable, connect timeout
  kTimeout,         // no response (headers or body) within upstreamIdleTimeout
  kBeforeResponse,  // reset or closed before a response began
  kMidResponse,     // failed while the response was relayed
  kStaleReused,     // a pooled connection the endpoint had closed (retried on a fresh one)
  kCount
};

// TLS handshakes on the client listener, by result.
enum class TlsHandshake : std::uint8_t { kOk, kFailed, kTimeout, kCount };

struct EndpointStats {
  std::uint64_t connections_new = 0;
  std::uint64_t connections_reused = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(UpstreamError::kCount)> errors{};
};

// Lookup by string_view without building a key string (C++20).
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// One tenant's usage, for chargeback: requests by outcome, and the tokens
// of its served requests.
struct TenantStats {
  StringMap<std::uint64_t> outcomes;
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
};

// The series past a cap (models, tenants, flows) are summed under this
// label value. No tenant id or fairness id can take it ('(' is not a token
// character), so no tenant merges with the overflow; a model sent as
// "(other)" is counted there.
inline constexpr std::string_view kOverflowLabel = "(other)";

struct ThreadStats {
  explicit ThreadStats(std::size_t max_models = 100) : max_models(max_models) {}

  // The stats of `model`; beyond `max_models` distinct names, the overflow.
  ModelStats& model(std::string_view name);
  EndpointStats& endpoint(std::size_t index) {
    if (index >= endpoints.size()) endpoints.resize(index + 1);
    return endpoints[index];
  }
  void outcome(std::string_view what);
  // An authentication's result ("ok" or a failure's reason: a fixed set).
  void auth_result(std::string_view what);
  // The stats of `tenant`; beyond `max_models` distinct tenants (the same
  // cap as models and flows), the overflow.
  TenantStats& tenant(std::string_view name);
  // Models with their own series (the overflow does not count against the cap).
  std::size_t named_models() const { return models.size() - models.count(kOverflowLabel); }

  // Adds another I/O thread's copy (for the merged exposition).
  void merge(const ThreadStats& o);
  // The families, after the merge. `endpoint_address(i)` names slot i.
  void render(MetricsText& m, const std::vector<std::string>& endpoint_addresses) const;
  void render_identity(MetricsText& m) const;

  std::size_t max_models;
  StringMap<ModelStats> models;
  StringMap<std::uint64_t> outcomes;      // sluice_requests_total{outcome}
  StringMap<std::uint64_t> auth_results;  // sluice_auth_requests_total{result}
  StringMap<TenantStats> tenants;
  std::vector<EndpointStats> endpoints;
  // sluice_tls_handshakes_total{result} (rendered by the admin plane, with
  // server.tls only).
  std::array<std::uint64_t, static_cast<std::size_t>(TlsHandshake::kCount)> tls_handshakes{};
};

}  // namespace sluice::observe
