#include "config/llmd_document.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace sluice::config {

using namespace detail;

namespace {

// The plugins that read the request's body (its prompt, model or length):
// with passthrough-parser alone, nothing would feed them.
constexpr std::array<std::string_view, 7> kBodyPlugins = {"approx-prefix-cache-producer",
                                                          "prefix-cache-scorer",
                                                          "prefix-based-pd-decider",
                                                          "lora-affinity-scorer",
                                                          "prefix-cache-affinity-filter",
                                                          "context-length-aware",
                                                          "no-hit-lru-scorer"};

bool is_parser_type(const std::string& t) {
  return t == "openai-parser" || t == "passthrough-parser";
}

}  // namespace

bool is_supported_api_version(const std::string& v) {
  return v == "inference.networking.x-k8s.io/v1alpha1" || v == "llm-d.ai/v1alpha1" ||
         v == "llm-d.ai/v1";
}

namespace {

// One entry: the gate's name, or "" when it is turned off.
std::string read_feature_gate(const Reader& r, const YAML::Node& n, const std::string& path) {
  std::string gate = r.string(n, path);
  const auto eq = gate.find('=');
  if (eq == std::string::npos) return gate;
  const std::string value = gate.substr(eq + 1);
  gate.resize(eq);
  if (value != "true" && value != "false")
    fail(r.source, n, path, "a gate is name, name=true or name=false, not '" + value + "'");
  return value == "true" ? gate : std::string();
}

}  // namespace

void read_feature_gates(const Reader& r, Config& c, const YAML::Node& n) {
  r.sequence(n, "featureGates");
  for (std::size_t i = 0; i < n.size(); ++i) {
    std::string path = "featureGates[" + std::to_string(i) + "]";
    auto gate = read_feature_gate(r, n[i], path);
    if (gate.empty()) continue;  // name=false: off, as when absent
    if (gate != "flowControl" && gate != "dataLayer" && gate != "enableLegacyMetrics" &&
        gate != "prepareDataPlugins")
      fail(c.source, n[i], path,
           "unknown feature gate '" + gate +
               "' (expected flowControl, dataLayer, prepareDataPlugins or enableLegacyMetrics)");
    c.feature_gates.push_back(gate);
  }
}

void read_request_handler(const Reader& r, Config& c, const YAML::Node& node) {
  auto& rh = c.request_handler;
  Fields f(r.source, node, "requestHandler");
  if (auto n = f.take("propagatePriority"))
    rh.propagate_priority = r.boolean(n, f.child("propagatePriority"));
  if (auto list = f.take("parsers")) {
    if (c.parser.IsMap())  // GIE's top-level parser: was given
      fail(r.source, list, f.child("parsers"),
           "two parsers: the top-level parser: and requestHandler.parsers; keep one");
    r.sequence(list, f.child("parsers"));
    if (list.size() == 0) fail(r.source, list, f.child("parsers"), "must not be empty");
    rh.openai = false;
    std::string fallback;  // the passthrough parser met, if any
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at = f.child("parsers") + "[" + std::to_string(i) + "]";
      Fields pf(r.source, list[i], at);
      auto ref = pf.take("pluginRef");
      if (!ref) fail(r.source, list[i], at + ".pluginRef", "is required");
      const std::string name = r.string(ref, at + ".pluginRef");
      pf.finish();
      const auto p = std::find_if(c.plugins.begin(), c.plugins.end(),
                                  [&](const PluginSpec& s) { return s.name == name; });
      if (p == c.plugins.end())
        fail(r.source, ref, at + ".pluginRef",
             "unknown plugin '" + name + "' (declare it under plugins:)");
      if (!is_parser_type(p->type))
        fail(r.source, ref, at + ".pluginRef",
             "plugin '" + name + "' is a " + p->type +
                 ", not a parser (openai-parser or passthrough-parser)");
      // llm-d silently skips a parser after the fallback, and lets two of
      // one kind race for the same paths: both are errors here.
      if (!fallback.empty())
        fail(r.source, ref, at + ".pluginRef",
             "two parsers: '" + name + "' comes after passthrough-parser '" + fallback +
                 "', which takes every path left, so it would never parse anything");
      for (const auto& prev : rh.parsers) {
        const auto q = std::find_if(c.plugins.begin(), c.plugins.end(),
                                    [&](const PluginSpec& s) { return s.name == prev; });
        if (q->type == p->type)
          fail(r.source, ref, at + ".pluginRef",
               "two parsers of one kind: '" + prev + "' and '" + name + "' are both " + p->type);
      }
      rh.parsers.push_back(name);
      if (p->type == "openai-parser") rh.openai = true;
      if (p->type == "passthrough-parser") rh.passthrough = true, fallback = name;
    }
  }
  f.finish();
}

void check_request_handler(const Reader& r, const Config& c, const YAML::Node& root) {
  const auto& rh = c.request_handler;
  if (rh.openai) return;
  const YAML::Node where = root["requestHandler"]["parsers"];
  for (const auto& p : c.plugins)
    for (auto body : kBodyPlugins)
      if (p.type == body)
        fail(r.source, where, "requestHandler.parsers",
             "passthrough-parser forwards bodies unread, and plugin '" + p.name + "' (" + p.type +
                 ", line " + std::to_string(p.line) +
                 ") reads the body: add openai-parser before passthrough-parser, or drop the "
                 "plugin");
  for (const auto& t : c.tenants)
    if (!t.models.empty() || t.max_tokens > 0)
      fail(r.source, where, "requestHandler.parsers",
           "passthrough-parser forwards bodies unread, and tenant '" + t.id +
               "' has a policy that reads the body (models or maxTokens): add openai-parser "
               "before passthrough-parser");
}

}  // namespace sluice::config
