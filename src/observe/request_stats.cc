#include "observe/request_stats.h"

#include <algorithm>
#include <map>

#include "observe/metrics_text.h"

namespace sluice::observe {

ModelStats& ThreadStats::model(std::string_view name) {
  if (name.empty()) name = "unknown";
  auto it = models.find(name);
  if (it != models.end()) return it->second;
  if (name == kOverflowLabel) return models[std::string(kOverflowLabel)];
  if (named_models() >= max_models) return models[std::string(kOverflowLabel)];
  return models[std::string(name)];
}

namespace {

void count(StringMap<std::uint64_t>& m, std::string_view what, std::uint64_t n = 1) {
  auto it = m.find(what);
  if (it != m.end()) {
    it->second += n;
    return;
  }
  m.emplace(std::string(what), n);
}

std::size_t named(const StringMap<TenantStats>& m) { return m.size() - m.count(kOverflowLabel); }

}  // namespace

void ThreadStats::outcome(std::string_view what) { count(outcomes, what); }

void ThreadStats::auth_result(std::string_view what) { count(auth_results, what); }

TenantStats& ThreadStats::tenant(std::string_view name) {
  auto it = tenants.find(name);
  if (it != tenants.end()) return it->second;
  if (named(tenants) >= max_models) return tenants[std::string(kOverflowLabel)];
  return tenants[std::string(name)];
}

void ThreadStats::merge(const ThreadStats& o) {
  for (const auto& [name, s] : o.models) {
    auto& d = name != kOverflowLabel && !models.count(name) && named_models() >= max_models
                  ? models[std::string(kOverflowLabel)]
                  : models[name];
    d.requests += s.requests;
    for (const auto& [code, n] : s.errors) d.errors[code] += n;
    d.duration.add(s.duration);
    d.ttft[0].add(s.ttft[0]);
    d.ttft[1].add(s.ttft[1]);
    d.input_tokens.add(s.input_tokens);
    d.output_tokens.add(s.output_tokens);
    d.running += s.running;
  }
  for (const auto& [k, n] : o.outcomes) outcomes[k] += n;
  for (const auto& [k, n] : o.auth_results) auth_results[k] += n;
  for (const auto& [name, t] : o.tenants) {
    auto& d = name != kOverflowLabel && !tenants.count(name) && named(tenants) >= max_models
                  ? tenants[std::string(kOverflowLabel)]
                  : tenants[name];
    for (const auto& [k, n] : t.outcomes) count(d.outcomes, k, n);
    d.input_tokens += t.input_tokens;
    d.output_tokens += t.output_tokens;
  }
  for (std::size_t i = 0; i < tls_handshakes.size(); ++i) tls_handshakes[i] += o.tls_handshakes[i];
  if (endpoints.size() < o.endpoints.size()) endpoints.resize(o.endpoints.size());
  for (std::size_t i = 0; i < o.endpoints.size(); ++i) {
    endpoints[i].connections_new += o.endpoints[i].connections_new;
    endpoints[i].connections_reused += o.endpoints[i].connections_reused;
    for (std::size_t k = 0; k < endpoints[i].errors.size(); ++k)
      endpoints[i].errors[k] += o.endpoints[i].errors[k];
  }
}

namespace {

template <class H>
void histogram(MetricsText& m, std::string_view name, MetricsText::Labels labels, const H& h) {
  m.histogram(name, labels, h.kBounds, h.counts, h.sum);
}

constexpr std::array<std::string_view, static_cast<std::size_t>(UpstreamError::kCount)>
    kErrorKinds = {"connect", "timeout", "before-response", "mid-response", "stale-reused"};

}  // namespace

void ThreadStats::render_identity(MetricsText& m) const {
  m.family("sluice_auth_requests_total", "counter",
           "Authentications (auth:) by result: ok, or why the credentials were refused.");
  std::map<std::string, std::uint64_t> results(auth_results.begin(), auth_results.end());
  for (const auto& [r, n] : results)
    m.sample("sluice_auth_requests_total", {{"result", r}}, static_cast<double>(n));
  std::map<std::string, const TenantStats*> sorted;
  for (const auto& [name, t] : tenants) sorted[name] = &t;
  m.family("sluice_tenant_requests_total", "counter",
           "An authenticated tenant's requests, by how they ended (as sluice_requests_total).");
  for (const auto& [name, t] : sorted) {
    std::map<std::string, std::uint64_t> by(t->outcomes.begin(), t->outcomes.end());
    for (const auto& [o, n] : by)
      m.sample("sluice_tenant_requests_total", {{"tenant", name}, {"outcome", o}},
               static_cast<double>(n));
  }
  m.family("sluice_tenant_input_tokens_total", "counter",
           "Input tokens of a tenant's served requests (estimated as in "
           "inference_objective_input_tokens).");
  for (const auto& [name, t] : sorted)
    m.sample("sluice_tenant_input_tokens_total", {{"tenant", name}},
             static_cast<double>(t->input_tokens));
  m.family("sluice_tenant_output_tokens_total", "counter",
           "Output tokens of a tenant's served requests.");
  for (const auto& [name, t] : sorted)
    m.sample("sluice_tenant_output_tokens_total", {{"tenant", name}},
             static_cast<double>(t->output_tokens));
}

void ThreadStats::render(MetricsText& m, const std::vector<std::string>& addresses) const {
  // Sorted, so a scrape reads the same way twice.
  std::map<std::string, const ModelStats*> sorted;
  for (const auto& [name, s] : models) sorted[name] = &s;

  m.family("inference_objective_request_total", "counter", "Inference requests, by model.");
  for (const auto& [name, s] : sorted)
    m.sample("inference_objective_request_total",
             {{"model_name", name}, {"target_model_name", name}}, static_cast<double>(s->requests));
  m.family("inference_objective_request_error_total", "counter",
           "Inference requests that did not end in a model response, by model and error code.");
  for (const auto& [name, s] : sorted) {
    std::map<std::string, std::uint64_t> codes(s->errors.begin(), s->errors.end());
    for (const auto& [code, n] : codes)
      m.sample("inference_objective_request_error_total",
               {{"model_name", name}, {"target_model_name", name}, {"error_code", code}},
               static_cast<double>(n));
  }
  m.family("inference_objective_request_duration_seconds", "histogram",
           "Inference request time, from the request read to the response's last byte.");
  for (const auto& [name, s] : sorted)
    histogram(m, "inference_objective_request_duration_seconds",
              {{"model_name", name}, {"target_model_name", name}}, s->duration);
  m.family("inference_objective_input_tokens", "histogram",
           "Input tokens per served request (estimated from the prompt's length, 4 characters a "
           "token).");
  for (const auto& [name, s] : sorted)
    histogram(m, "inference_objective_input_tokens",
              {{"model_name", name}, {"target_model_name", name}}, s->input_tokens);
  m.family(
      "inference_objective_output_tokens", "histogram",
      "Output tokens per served request (usage.completion_tokens, else streamed token events).");
  for (const auto& [name, s] : sorted)
    histogram(m, "inference_objective_output_tokens",
              {{"model_name", name}, {"target_model_name", name}}, s->output_tokens);
  m.family("inference_objective_running_requests", "gauge",
           "Inference requests being proxied now, by model.");
  for (const auto& [name, s] : sorted)
    m.sample("inference_objective_running_requests", {{"model_name", name}},
             static_cast<double>(s->running));

  m.family("sluice_requests_total", "counter",
           "Requests by how they ended: served, a dropped reason (rejected-*, evicted-*), a client "
           "error code, upstream-error/-timeout, or client-closed.");
  std::map<std::string, std::uint64_t> sorted_outcomes(outcomes.begin(), outcomes.end());
  for (const auto& [o, n] : sorted_outcomes)
    m.sample("sluice_requests_total", {{"outcome", o}}, static_cast<double>(n));
  render_identity(m);
  m.family("sluice_upstream_errors_total", "counter", "Failures talking to an endpoint, by kind.");
  for (std::size_t i = 0; i < endpoints.size() && i < addresses.size(); ++i)
    for (std::size_t k = 0; k < kErrorKinds.size(); ++k)
      m.sample("sluice_upstream_errors_total",
               {{"endpoint", addresses[i]}, {"kind", kErrorKinds[k]}},
               static_cast<double>(endpoints[i].errors[k]));
  m.family("sluice_upstream_connections_total", "counter",
           "Upstream requests by connection: a new one, or reused from the keep-alive pool.");
  for (std::size_t i = 0; i < endpoints.size() && i < addresses.size(); ++i) {
    m.sample("sluice_upstream_connections_total",
             {{"endpoint", addresses[i]}, {"connection", "new"}},
             static_cast<double>(endpoints[i].connections_new));
    m.sample("sluice_upstream_connections_total",
             {{"endpoint", addresses[i]}, {"connection", "reused"}},
             static_cast<double>(endpoints[i].connections_reused));
  }
}

}  // namespace sluice::observe
