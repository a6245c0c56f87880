// Readers of flowControl:, saturationDetector: and the flow-control and
// detector plugins' parameters (moved out of config.cc, which calls them
// in parse()). Internal to src/config/.
#include "config/flow_control_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "config/units.h"
#include "sluice/extensions.h"

namespace sluice::config {

using namespace detail;

// Kinds and type names come from the extension registry's list
// (sluice/extensions.h), the same one the factories are checked against.
bool is_detector_type(const std::string& t) {
  return is_builtin(t, ExtensionKind::kSaturationDetector);
}

bool is_usage_limit_type(const std::string& t) {
  return is_builtin(t, ExtensionKind::kUsageLimitPolicy);
}

namespace {

std::string short_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// A ceiling: a number in [0, 1] (NaN is not).
double ceiling(const Reader& r, const YAML::Node& n, const std::string& path, bool zero_ok,
               bool one_ok) {
  double v = r.number(n, path);
  const bool ok = (zero_ok ? v >= 0 : v > 0) && (one_ok ? v <= 1 : v < 1);
  if (!ok)
    fail(r.source, n, path,
         std::string("must be in ") + (zero_ok ? "[0, " : "(0, ") + (one_ok ? "1]" : "1)"));
  return v;
}

// priority-holdback-policy's explicit domain: `list` maps band priority to
// ceiling; returned highest band first, none above a higher band's.
std::vector<std::pair<int, double>> read_ceilings(const Reader& r, const Fields& f,
                                                  const YAML::Node& list) {
  // Keys are kept apart and never assigned: assigning a YAML::Node writes
  // through to the document.
  std::vector<YAML::Node> keys;
  std::vector<std::pair<int, double>> entries;
  for (const auto& kv : list) {
    const std::string key = r.scalar(kv.first, f.child("ceilings"));
    const std::string at = f.child("ceilings") + "." + key;
    auto v = r.integer(kv.first, at);
    if (v < -1000000 || v > 1000000)
      fail(r.source, kv.first, at, "a priority must be between -1000000 and 1000000");
    for (const auto& e : entries)
      if (e.first == v) fail(r.source, kv.first, at, "duplicate band priority " + key);
    entries.emplace_back(static_cast<int>(v), ceiling(r, kv.second, at, true, true));
    keys.push_back(kv.first);
  }
  std::vector<std::size_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return entries[a].first > entries[b].first; });
  // Highest band first; a lower band may not have a higher ceiling.
  for (std::size_t k = 1; k < order.size(); ++k) {
    const auto& hi = entries[order[k - 1]];
    const auto& lo = entries[order[k]];
    if (lo.second > hi.second)
      fail(r.source, keys[order[k]], f.child("ceilings") + "." + std::to_string(lo.first),
           "ceilings must not increase towards lower priorities: band " + std::to_string(lo.first) +
               " has " + short_number(lo.second) + ", above band " + std::to_string(hi.first) +
               "'s " + short_number(hi.second));
  }
  std::vector<std::pair<int, double>> ceilings;
  for (auto i : order) ceilings.push_back(entries[i]);
  return ceilings;
}

// priority-holdback-policy's parameters (but unknown fields): a domain (rank,
// value or explicit); ceilings per band for explicit, else a linear shape
// from minCeiling to maxCeiling.
void read_holdback(const Reader& r, const PluginSpec& p, Fields& f, UsageLimitSpec& u) {
  std::string domain = "rank";
  auto dn = f.take("domain");
  if (dn) {
    domain = r.string(dn, f.child("domain"));
    if (domain != "rank" && domain != "value" && domain != "explicit")
      fail(r.source, dn, f.child("domain"), "must be rank, value or explicit");
  }
  auto shape = f.take("shape"), min = f.take("minCeiling"), max = f.take("maxCeiling");
  auto list = f.take("ceilings");
  if (domain == "explicit") {
    u.explicit_domain = true;
    for (auto [n, key] : {std::pair{shape, "shape"}, {min, "minCeiling"}, {max, "maxCeiling"}})
      if (n) fail(r.source, n, f.child(key), "must not be set when domain is explicit");
    if (!list || !list.IsMap() || list.size() == 0)
      fail(r.source, list ? list : dn, f.child("ceilings"),
           "is required when domain is explicit: a mapping of band priority to ceiling");
    for (const auto& e : read_ceilings(r, f, list)) u.ceilings.push_back(e);
    return;
  }
  u.value_domain = domain == "value";
  if (list) fail(r.source, list, f.child("ceilings"), "must not be set unless domain is explicit");
  if (!min) fail(r.source, p.parameters, f.child("minCeiling"), "is required");
  u.min_ceiling = ceiling(r, min, f.child("minCeiling"), true, false);
  if (max) u.max_ceiling = ceiling(r, max, f.child("maxCeiling"), false, true);
  if (!(u.max_ceiling > u.min_ceiling))
    fail(r.source, max ? max : min, f.child(max ? "maxCeiling" : "minCeiling"),
         "minCeiling must be strictly less than maxCeiling");
  if (shape && r.string(shape, f.child("shape")) != "linear")
    fail(r.source, shape, f.child("shape"), "must be linear (the only shape llm-d has)");
}

}  // namespace

// A usage-limit policy's parameters, checked as llm-d checks them (and the
// static policy's threshold as its documentation says, which its code does
// not check).
UsageLimitSpec read_usage_limit(const Reader& r, const PluginSpec& p) {
  UsageLimitSpec u;
  u.type = p.type;
  u.name = p.name;
  const std::string path = "plugins[" + p.name + "].parameters";
  const bool empty =
      !p.parameters || p.parameters.IsNull() || (p.parameters.IsMap() && p.parameters.size() == 0);
  if (p.type == "soft-reflective-ceiling-policy") {
    if (!empty) fail(r.source, p.parameters, path, "soft-reflective-ceiling-policy takes none");
    return u;
  }
  if (empty) {
    if (p.type == "priority-holdback-policy")
      fail(r.source, p.parameters, path + ".minCeiling", "is required");
    return u;
  }
  Fields f(r.source, p.parameters, path);
  if (p.type == "static-usage-limit-policy") {
    if (auto n = f.take("threshold"))
      u.threshold = ceiling(r, n, f.child("threshold"), false, true);
    f.finish();
    return u;
  }
  read_holdback(r, p, f, u);  // priority-holdback-policy
  f.finish();
  return u;
}

namespace {

// The plugin instance named `ref`: declared in plugins:, or one of the
// defaults GIE registers implicitly under its type name.
const PluginSpec* find_plugin(const Config& c, const std::string& ref) {
  for (const auto& p : c.plugins)
    if (p.name == ref) return &p;
  return nullptr;
}

std::string resolve_ref(const Reader& r, const Config& c, const YAML::Node& n,
                        const std::string& path, ExtensionKind kind,
                        std::initializer_list<const char*> implicit) {
  auto ref = r.string(n, path);
  const std::string kind_text(kind_name(kind));
  if (const PluginSpec* p = find_plugin(c, ref)) {
    if (!is_builtin(p->type, kind))
      fail(r.source, n, path, "plugin '" + ref + "' is a " + p->type + ", not a " + kind_text);
    return p->type;
  }
  for (const char* t : implicit)
    if (ref == t) return ref;
  fail(r.source, n, path,
       "unknown " + kind_text + " '" + ref + "' (declare it under plugins:, " +
           (is_builtin(ref, kind) ? "e.g. '- type: " + ref + "'"
                                  : "with type " + builtin_types_of(kind)) +
           ")");
}

void read_band(const Reader& r, const Config& c, const YAML::Node& node, const std::string& path,
               BandSpec& b, bool needs_priority) {
  Fields f(r.source, node, path);
  if (auto n = f.take("priority")) {
    auto v = r.integer(n, f.child("priority"));
    if (v < -1000000 || v > 1000000)
      fail(r.source, n, f.child("priority"), "must be between -1000000 and 1000000");
    b.priority = static_cast<int>(v);
  } else if (needs_priority) {
    fail(r.source, node, f.child("priority"), "is required");
  }
  if (auto n = f.take("maxBytes")) {
    b.max_bytes = r.quantity(n, f.child("maxBytes"));
    if (b.max_bytes == 0) b.max_bytes = 1000000000;  // GIE: 0 means the default bound
  }
  if (auto n = f.take("maxRequests")) {
    b.max_requests = r.quantity(n, f.child("maxRequests"));
    if (b.max_requests == 0) b.max_requests = kDefaultBandMaxRequests;  // llm-d: 0 is the default
  }
  if (auto n = f.take("fairnessPolicyRef")) {
    b.fairness_ref = r.string(n, f.child("fairnessPolicyRef"));
    b.fairness_type =
        resolve_ref(r, c, n, f.child("fairnessPolicyRef"), ExtensionKind::kFairnessPolicy,
                    {"global-strict-fairness-policy"});
  }
  if (auto n = f.take("orderingPolicyRef")) {
    b.ordering_ref = r.string(n, f.child("orderingPolicyRef"));
    b.ordering_type = resolve_ref(r, c, n, f.child("orderingPolicyRef"),
                                  ExtensionKind::kOrderingPolicy, {"fcfs-ordering-policy"});
  }
  if (auto n = f.take("defaultRequestTTL")) {
    const auto d = r.duration(n, f.child("defaultRequestTTL"));
    if (d.count() < 0) fail(r.source, n, f.child("defaultRequestTTL"), "must not be negative");
    b.ttl_set = true;  // 0s: no TTL in this band (llm-d)
    b.ttl = d.count() > 0 ? std::optional<nanoseconds>(d) : std::nullopt;
  }
  if (auto n = f.take("antiStarvationShare")) {
    b.anti_starvation_share = r.number(n, f.child("antiStarvationShare"));
    if (std::signbit(b.anti_starvation_share) || b.anti_starvation_share >= 1)
      fail(r.source, n, f.child("antiStarvationShare"), "must be at least 0 and below 1");
  }
  f.finish();
}

void read_headroom(const Reader& r, HeadroomSpec& h, const YAML::Node& node,
                   const std::string& path) {
  Fields f(r.source, node, path);
  h.enabled = true;
  auto p = f.take("protectedPriority");
  if (!p) fail(r.source, node, f.child("protectedPriority"), "is required");
  auto v = r.integer(p, f.child("protectedPriority"));
  if (v < -1000000 || v > 1000000)
    fail(r.source, p, f.child("protectedPriority"), "must be between -1000000 and 1000000");
  h.protected_priority = static_cast<int>(v);
  auto count = [&](const char* key, std::uint64_t& out, std::uint64_t max) {
    auto n = f.take(key);
    if (n) {
      out = r.quantity(n, f.child(key));
      if (out > max) fail(r.source, n, f.child(key), "must be at most " + std::to_string(max));
    }
    return n;
  };
  count("reserve", h.reserve, 100000);
  const YAML::Node tokens = count("reserveTokens", h.reserve_tokens, std::uint64_t{1} << 40);
  count("overAdmission", h.over_admission, 100000);
  const YAML::Node lane = count("reserveEndpoints", h.reserve_endpoints, 100000);
  if (auto n = f.take("scope")) {
    auto s = r.string(n, f.child("scope"));
    if (s != "endpoint" && s != "pool")
      fail(r.source, n, f.child("scope"), "must be endpoint or pool");
    h.pool_scope = s == "pool";
  }
  if (auto n = f.take("lend")) h.lend = r.boolean(n, f.child("lend"));
  if (auto n = f.take("lendAfterIdle")) {
    h.lend_after_idle = r.duration(n, f.child("lendAfterIdle"));
    if (h.lend_after_idle.count() < 0)
      fail(r.source, n, f.child("lendAfterIdle"), "must not be negative");
  }
  if (h.reserve == 0 && h.reserve_tokens == 0 && h.over_admission == 0 && h.reserve_endpoints == 0)
    fail(r.source, node, path,
         "reserves nothing: set reserve, reserveTokens, reserveEndpoints or overAdmission");
  if (h.pool_scope && h.reserve_endpoints > 0)
    fail(r.source, lane, f.child("reserveEndpoints"),
         "is per endpoint only (scope: pool reserves requests anywhere in the pool)");
  if (h.pool_scope && h.reserve_tokens > 0)
    fail(r.source, tokens, f.child("reserveTokens"),
         "is per endpoint only (scope: pool reserves requests)");
  f.finish();
}

void read_eviction(const Reader& r, EvictionSpec& e, const YAML::Node& node,
                   const std::string& path) {
  Fields f(r.source, node, path);
  if (auto list = f.take("priorities")) {
    r.sequence(list, f.child("priorities"));
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at = f.child("priorities") + "[" + std::to_string(i) + "]";
      auto v = r.integer(list[i], at);
      if (v >= 0)
        fail(r.source, list[i], at,
             "band " + std::to_string(v) +
                 " is not sheddable: only bands below priority 0 can be evicted");
      if (v < -1000000) fail(r.source, list[i], at, "must be at least -1000000");
      e.priorities.push_back(static_cast<int>(v));
    }
  }
  auto duration = [&](const char* key, bool zero_ok) -> std::optional<nanoseconds> {
    auto n = f.take(key);
    if (!n) return std::nullopt;
    auto d = r.duration(n, f.child(key));
    if (d.count() < 0 || (!zero_ok && d.count() == 0))
      fail(r.source, n, f.child(key),
           zero_ok ? "must not be negative" : "must be greater than zero");
    return d;
  };
  if (auto d = duration("waitBudget", true)) e.wait_budget = *d;
  if (auto d = duration("grace", true)) e.grace = *d;
  if (auto d = duration("confirmationTimeout", false)) e.confirmation_timeout = *d;
  f.finish();
}

// flowControl: the queue's limits (bytes, requests, flows) and the
// requests' TTLs.
void read_queue_limits(const Reader& r, Fields& f, FlowControlSpec& fc) {
  if (auto n = f.take("maxBytes")) fc.max_bytes = r.quantity(n, f.child("maxBytes"));
  if (auto n = f.take("maxRequests")) fc.max_requests = r.quantity(n, f.child("maxRequests"));
  if (auto n = f.take("maxFlows")) {
    fc.max_flows = r.quantity(n, f.child("maxFlows"));
    if (fc.max_flows == 0 || fc.max_flows > 10000000)
      fail(r.source, n, f.child("maxFlows"), "must be between 1 and 10000000");
  }
  if (auto n = f.take("defaultRequestTTL")) {
    auto d = r.duration(n, f.child("defaultRequestTTL"));
    // GIE: 0 means no TTL.
    fc.default_request_ttl = d.count() > 0 ? std::optional<nanoseconds>(d) : std::nullopt;
  }
  if (auto n = f.take("noEndpointRequestTTL")) {
    auto d = r.duration(n, f.child("noEndpointRequestTTL"));
    fc.no_endpoint_ttl_set = true;  // 0: no expiry while the pool is empty (llm-d)
    fc.no_endpoint_request_ttl = d.count() > 0 ? std::optional<nanoseconds>(d) : std::nullopt;
  }
}

// flowControl: the band templates (non-negative and negative priorities)
// and the priority bands, each from the default template, priorities
// unique.
void read_priority_bands(const Reader& r, Config& c, Fields& f) {
  auto& fc = c.flow_control;
  if (auto n = f.take("defaultPriorityBand")) {
    read_band(r, c, n, f.child("defaultPriorityBand"), fc.default_band, false);
    fc.default_band.priority = 0;  // GIE ignores it: the template fits any priority
  }
  if (auto n = f.take("defaultNegativePriorityBand")) {
    BandSpec b = fc.default_band;
    read_band(r, c, n, f.child("defaultNegativePriorityBand"), b, false);
    b.priority = -1;  // a template: the priority is the band's own
    fc.default_negative_band = b;
  }
  if (auto list = f.take("priorityBands")) {
    std::set<int> seen;
    r.sequence(list, f.child("priorityBands"));
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::string path = f.child("priorityBands") + "[" + std::to_string(i) + "]";
      BandSpec b = fc.default_band;
      read_band(r, c, list[i], path, b, true);
      if (!seen.insert(b.priority).second)
        fail(r.source, list[i], path + ".priority",
             "duplicate band priority " + std::to_string(b.priority));
      fc.bands.push_back(std::move(b));
    }
  }
}

// flowControl: displacement on or off, how long an idle flow is kept, and
// eviction (enableEviction, or an eviction section, which turns it on).
void read_displacement_eviction(const Reader& r, Fields& f, FlowControlSpec& fc) {
  if (auto n = f.take("displacementPolicy")) {
    auto v = r.string(n, f.child("displacementPolicy"));
    if (v != "none" && !is_builtin(v, ExtensionKind::kDisplacementPolicy))
      fail(r.source, n, f.child("displacementPolicy"),
           "unknown displacement policy '" + v + "' (expected " +
               builtin_types_of(ExtensionKind::kDisplacementPolicy) + " or none)");
    fc.displacement = v != "none";
  }
  if (auto n = f.take("flowIdleTimeout")) {
    fc.flow_idle_timeout = r.duration(n, f.child("flowIdleTimeout"));
    if (fc.flow_idle_timeout.count() <= 0)
      fail(r.source, n, f.child("flowIdleTimeout"), "must be greater than zero");
  }
  const YAML::Node enable = f.take("enableEviction");
  if (enable) fc.eviction.enabled = r.boolean(enable, f.child("enableEviction"));
  if (auto n = f.take("eviction")) {
    if (enable && !fc.eviction.enabled)
      fail(r.source, n, f.child("eviction"), "is set while enableEviction is false");
    fc.eviction.enabled = true;  // the section alone turns it on
    read_eviction(r, fc.eviction, n, f.child("eviction"));
  }
}

// flowControl.usageLimitPolicyPluginRef: a declared usage limit policy, or
// static-usage-limit-policy (which llm-d registers by itself).
void read_usage_limit_ref(const Reader& r, Config& c, const YAML::Node& n,
                          const std::string& path) {
  auto& fc = c.flow_control;
  const auto ref = r.string(n, path);
  if (const PluginSpec* p = find_plugin(c, ref)) {
    if (!is_usage_limit_type(p->type))
      fail(r.source, n, path,
           "plugin '" + ref + "' is a " + p->type + ", not a usage limit policy");
    fc.usage_limit = read_usage_limit(r, *p);
  } else if (ref == "static-usage-limit-policy") {
    // llm-d registers this one by itself (threshold 1.0).
    fc.usage_limit.type = fc.usage_limit.name = ref;
  } else {
    fail(r.source, n, path,
         "unknown usage limit policy '" + ref + "' (declare it under plugins:, type " +
             builtin_types_of(ExtensionKind::kUsageLimitPolicy) + ")");
  }
}

// agent-identity: additionalSessionHeaders (header names, checked first),
// then llm-d's built-in list (Claude Code, OpenCode, Codex, Codex's legacy
// name). At most 32 additional names.
void read_agent_identity(const Reader& r, const PluginSpec& p, std::vector<std::string>& out) {
  out.clear();
  if (p.parameters && !p.parameters.IsNull()) {
    Fields f(r.source, p.parameters, "plugins[" + p.name + "].parameters");
    if (auto n = f.take("additionalSessionHeaders")) {
      const std::string path = f.child("additionalSessionHeaders");
      if (!n.IsSequence()) fail(r.source, n, path, "expected a list of header names");
      if (n.size() > 32) fail(r.source, n, path, "at most 32 header names");
      for (std::size_t i = 0; i < n.size(); ++i) {
        std::string name = r.string(n[i], path + "[" + std::to_string(i) + "]");
        const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) ||
                 std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
        });
        if (!token) fail(r.source, n[i], path + "[" + std::to_string(i) + "]", "not a header name");
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        out.push_back(std::move(name));
      }
    }
    f.finish();
  }
  for (const char* h :
       {"x-claude-code-session-id", "x-session-affinity", "session-id", "session_id"})
    out.emplace_back(h);
}

// program-aware-fairness: llm-d's validation (weights, half-life and TTL
// not negative, the sweep interval above zero, strategy las) and sluice's
// maxPrograms (1 to 1,000,000).
void read_program_aware(const Reader& r, const PluginSpec& p, ProgramAwareSpec& out) {
  if (!p.parameters || p.parameters.IsNull()) return;
  Fields f(r.source, p.parameters, "plugins[" + p.name + "].parameters");
  if (auto n = f.take("strategy")) {
    auto v = r.string(n, f.child("strategy"));
    if (v != "las" && !v.empty())
      fail(r.source, n, f.child("strategy"), "unknown strategy '" + v + "' (only las)");
  }
  auto not_negative = [&](const char* key, double& field) {
    if (auto n = f.take(key)) {
      double v = r.number(n, f.child(key));
      if (!(v >= 0)) fail(r.source, n, f.child(key), "must not be negative");
      field = v;
    }
  };
  not_negative("lasWeightService", out.weight_service);
  not_negative("lasWeightHeadWait", out.weight_head_wait);
  not_negative("lasHalfLifeSeconds", out.half_life_seconds);
  not_negative("evictionTtlSeconds", out.eviction_ttl_seconds);
  // llm-d's per-pick decay factor, dropped by llm-d-router in August 2026
  // for lasHalfLifeSeconds (it now refuses the key); llm-d's agentic-serving
  // guide still sets it. Accepted (in (0, 1]) and ignored: decay is the
  // half-life's.
  if (auto n = f.take("lasDecayFactor")) {
    double v = r.number(n, f.child("lasDecayFactor"));
    if (!(v > 0 && v <= 1)) fail(r.source, n, f.child("lasDecayFactor"), "must be in (0, 1]");
  }
  if (auto n = f.take("evictionSweepSeconds")) {
    double v = r.number(n, f.child("evictionSweepSeconds"));
    if (!(v > 0)) fail(r.source, n, f.child("evictionSweepSeconds"), "must be greater than zero");
    out.eviction_sweep_seconds = v;
  }
  if (auto n = f.take("maxPrograms")) {
    auto v = r.integer(n, f.child("maxPrograms"));
    if (v < 1 || v > 1000000) fail(r.source, n, f.child("maxPrograms"), "must be 1 to 1000000");
    out.max_programs = static_cast<std::uint32_t>(v);
  }
  f.finish();
}

}  // namespace

void read_flow_control(const Reader& r, Config& c, const YAML::Node& node) {
  auto& fc = c.flow_control;
  Fields f(r.source, node, "flowControl");
  read_queue_limits(r, f, fc);
  read_priority_bands(r, c, f);
  read_displacement_eviction(r, f, fc);
  const YAML::Node headroom = f.take("headroom");
  if (headroom) read_headroom(r, fc.headroom, headroom, f.child("headroom"));
  // llm-d: flowControl.saturationDetector, the same as the top-level one.
  if (auto n = f.take("saturationDetector")) read_saturation_detector(r, c, n);
  if (auto n = f.take("usageLimitPolicyPluginRef"))
    read_usage_limit_ref(r, c, n, f.child("usageLimitPolicyPluginRef"));
  const auto& d = c.saturation_detector;
  if (headroom && d.type == "concurrency-detector" && !d.tokens_mode &&
      fc.headroom.reserve >= d.max_concurrency)
    fail(r.source, headroom, f.child("headroom.reserve"),
         "leaves lower bands no room: it must be below the detector's maxConcurrency (" +
             std::to_string(d.max_concurrency) + ")");
  f.finish();
}

void read_plugin_parameters(const Reader& r, Config& c) {
  bool program_aware = false;
  for (const auto& p : c.plugins) {
    if (p.type == "agent-identity") {
      read_agent_identity(r, p, c.agent_session_headers);
      continue;
    }
    if (p.type == "program-aware-fairness") {
      if (program_aware)
        throw ConfigError(r.source + ":" + std::to_string(p.line) + ": plugins[" + p.name +
                          "]: a second program-aware-fairness plugin (one set of parameters "
                          "applies to every band)");
      program_aware = true;
      read_program_aware(r, p, c.flow_control.program_aware);
      continue;
    }
    if (p.type != "vtc-fairness-policy" || !p.parameters || p.parameters.IsNull()) continue;
    Fields f(r.source, p.parameters, "plugins[" + p.name + "].parameters");
    for (const char* key : {"inputPrice", "outputPrice"}) {
      auto n = f.take(key);
      if (!n) continue;
      double v = r.number(n, f.child(key));
      if (v < 0) fail(r.source, n, f.child(key), "must not be negative");
      (std::string(key) == "inputPrice" ? c.flow_control.vtc_input_price
                                        : c.flow_control.vtc_output_price) = v;
    }
    f.finish();
  }
}

void read_detector_parameters(const Reader& r, const PluginSpec& p, SaturationDetectorSpec& d) {
  d.type = p.type;
  if (!p.parameters || p.parameters.IsNull()) return;
  const std::string path = "plugins[" + p.name + "].parameters";
  Fields f(r.source, p.parameters, path);
  auto num = [&](const char* key, double min_exclusive,
                 bool inclusive_zero) -> std::optional<double> {
    auto n = f.take(key);
    if (!n) return std::nullopt;
    double v = r.number(n, f.child(key));
    if (inclusive_zero ? v < min_exclusive : !(v > min_exclusive))
      fail(r.source, n, f.child(key),
           inclusive_zero ? "must not be negative" : "must be greater than zero");
    return v;
  };
  if (auto v = num("headroom", 0, true)) d.headroom = *v;
  if (p.type == "utilization-detector") {
    if (auto v = num("queueDepthThreshold", 0, false)) d.queue_depth_threshold = *v;
    if (auto n = f.take("kvCacheUtilThreshold")) {
      double v = r.number(n, f.child("kvCacheUtilThreshold"));
      if (!(v > 0 && v <= 1))
        fail(r.source, n, f.child("kvCacheUtilThreshold"), "must be in (0, 1]");
      d.kv_cache_util_threshold = v;
    }
    if (auto n = f.take("metricsStalenessThreshold")) {
      d.metrics_staleness_threshold = r.duration(n, f.child("metricsStalenessThreshold"));
      if (d.metrics_staleness_threshold.count() <= 0)
        fail(r.source, n, f.child("metricsStalenessThreshold"), "must be greater than zero");
    }
  } else {
    if (auto n = f.take("concurrencyMode")) {
      auto v = r.string(n, f.child("concurrencyMode"));
      if (v != "requests" && v != "tokens")
        fail(r.source, n, f.child("concurrencyMode"), "must be requests or tokens");
      d.tokens_mode = v == "tokens";
    }
    if (auto v = num("maxConcurrency", 0, false))
      d.max_concurrency = static_cast<std::uint64_t>(*v);
    if (auto v = num("maxTokenConcurrency", 0, false))
      d.max_token_concurrency = static_cast<std::uint64_t>(*v);
  }
  f.finish();
}

void read_saturation_detector(const Reader& r, Config& c, const YAML::Node& node) {
  Fields f(r.source, node, "saturationDetector");
  std::string ref = "utilization-detector";
  YAML::Node refnode = f.take("pluginRef");
  if (refnode) ref = r.scalar(refnode, "saturationDetector.pluginRef");
  f.finish();
  if (ref.empty()) ref = "utilization-detector";
  if (const PluginSpec* p = find_plugin(c, ref)) {
    if (!is_detector_type(p->type))
      fail(r.source, refnode, "saturationDetector.pluginRef",
           "plugin '" + ref + "' is a " + p->type + ", not a saturation detector");
    read_detector_parameters(r, *p, c.saturation_detector);
    return;
  }
  if (ref != "utilization-detector")
    fail(r.source, refnode, "saturationDetector.pluginRef",
         "unknown saturation detector '" + ref + "' (declare it under plugins:, type " +
             builtin_types_of(ExtensionKind::kSaturationDetector) + ")");
}

}  // namespace sluice::config
