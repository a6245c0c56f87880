#include "config/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "config/units.h"

namespace sluice::config {
namespace {

// Every error goes through here so that all messages have one shape:
// "FILE:LINE: field.path: what is wrong".
[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& what) {
  std::ostringstream out;
  out << source;
  if (node.IsDefined() && node.Mark().line >= 0) out << ":" << node.Mark().line + 1;
  out << ": " << (path.empty() ? "(top level)" : path) << ": " << what;
  throw ConfigError(out.str());
}

// A YAML mapping whose keys are consumed one by one; whatever is left at the
// end is an unknown field, which is an error naming it.
class Fields {
 public:
  Fields(const std::string& source, const YAML::Node& node, std::string path)
      : source_(source), node_(node), path_(std::move(path)) {
    if (!node.IsMap()) fail(source_, node, path_, "expected a mapping");
  }

  YAML::Node take(const std::string& key) {
    taken_.insert(key);
    return node_[key];
  }

  std::string child(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void finish() const {
    for (const auto& kv : node_) {
      auto key = kv.first.as<std::string>();
      if (!taken_.count(key)) fail(source_, kv.first, child(key), "unknown field");
    }
  }

 private:
  const std::string& source_;
  YAML::Node node_;
  std::string path_;
  std::set<std::string> taken_;
};

struct Reader {
  const std::string& source;

  std::string scalar(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) fail(source, n, path, "expected a scalar value");
    return n.Scalar();
  }
  std::string string(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    if (s.empty()) fail(source, n, path, "must not be empty");
    return s;
  }
  long long integer(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) fail(source, n, path, "expected an integer, got '" + s + "'");
    return v;
  }
  double number(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) fail(source, n, path, "expected a number, got '" + s + "'");
    return v;
  }
  nanoseconds duration(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    auto d = parse_duration(s);
    if (!d) fail(source, n, path, "expected a duration like 500ms or 30s, got '" + s + "'");
    return *d;
  }
  std::uint64_t quantity(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    auto q = parse_quantity(s);
    if (!q) fail(source, n, path, "expected a size like 5000 or 8Mi, got '" + s + "'");
    return *q;
  }
  std::string host_port(const YAML::Node& n, const std::string& path) const {
    auto s = string(n, path);
    if (!parse_host_port(s)) fail(source, n, path, "expected HOST:PORT, got '" + s + "'");
    return s;
  }
  void sequence(const YAML::Node& n, const std::string& path) const {
    if (!n.IsSequence()) fail(source, n, path, "expected a list");
  }
};

// Reads a list of mappings: each item gets its own Fields (so unknown keys
// are reported with the item's path) and is appended to `out`.
template <class Item, class ReadItem>
void read_list(const Reader& r, const YAML::Node& node, const std::string& list, std::vector<Item>& out,
               ReadItem&& read_item) {
  r.sequence(node, list);
  for (std::size_t i = 0; i < node.size(); ++i) {
    Fields f(r.source, node[i], list + "[" + std::to_string(i) + "]");
    Item item;
    read_item(f, node[i], item);
    f.finish();
    out.push_back(std::move(item));
  }
}

// A required string field whose value must be unique within its list.
std::string unique_key(const Reader& r, Fields& f, const YAML::Node& item, const std::string& key,
                       std::set<std::string>& seen, const std::string& what) {
  auto n = f.take(key);
  if (!n) fail(r.source, item, f.child(key), "is required");
  auto value = r.string(n, f.child(key));
  if (!seen.insert(value).second) fail(r.source, n, f.child(key), "duplicate " + what + " '" + value + "'");
  return value;
}

void read_server(const Reader& r, const YAML::Node& node, ServerOptions& s) {
  Fields f(r.source, node, "server");
  auto positive = [&](const YAML::Node& n, const std::string& path, nanoseconds v) {
    if (v.count() <= 0) fail(r.source, n, path, "must be greater than zero");
    return v;
  };
  if (auto n = f.take("listen")) s.listen = r.host_port(n, f.child("listen"));
  if (auto n = f.take("adminListen")) s.admin_listen = r.host_port(n, f.child("adminListen"));
  if (auto n = f.take("threads")) {
    auto v = r.integer(n, f.child("threads"));
    if (v < 0 || v > 256) fail(r.source, n, f.child("threads"), "must be between 0 and 256");
    s.threads = static_cast<int>(v);
  }
  if (auto n = f.take("maxBodyBytes")) {
    s.max_body_bytes = r.quantity(n, f.child("maxBodyBytes"));
    if (s.max_body_bytes == 0) fail(r.source, n, f.child("maxBodyBytes"), "must be greater than zero");
  }
  if (auto n = f.take("maxHeaderBytes")) {
    auto v = r.quantity(n, f.child("maxHeaderBytes"));
    if (v < 1024 || v > (1u << 20))
      fail(r.source, n, f.child("maxHeaderBytes"), "must be between 1Ki and 1Mi");
    s.max_header_bytes = static_cast<std::uint32_t>(v);
  }
  struct {
    const char* key;
    nanoseconds* field;
  } durations[] = {
      {"headerReadTimeout", &s.header_read_timeout},
      {"bodyReadTimeout", &s.body_read_timeout},
      {"keepAliveIdleTimeout", &s.keep_alive_idle_timeout},
      {"clientWriteTimeout", &s.client_write_timeout},
      {"upstreamConnectTimeout", &s.upstream_connect_timeout},
      {"upstreamIdleTimeout", &s.upstream_idle_timeout},
      {"endpointDownBackoff", &s.endpoint_down_backoff},
      {"shutdownGracePeriod", &s.shutdown_grace_period},
  };
  for (auto& d : durations) {
    if (auto n = f.take(d.key)) *d.field = positive(n, f.child(d.key), r.duration(n, f.child(d.key)));
  }
  if (auto n = f.take("upstreamMaxIdlePerEndpoint")) {
    auto v = r.integer(n, f.child("upstreamMaxIdlePerEndpoint"));
    if (v < 0 || v > 100000)
      fail(r.source, n, f.child("upstreamMaxIdlePerEndpoint"), "must be between 0 and 100000");
    s.upstream_max_idle_per_endpoint = static_cast<std::uint32_t>(v);
  }
  f.finish();
}

void read_endpoints(const Reader& r, const YAML::Node& node, std::vector<EndpointConfig>& out) {
  std::set<std::string> seen;
  read_list(r, node, "endpoints", out, [&](Fields& f, const YAML::Node& item, EndpointConfig& ep) {
    auto addr = f.take("address");
    if (!addr) fail(r.source, item, f.child("address"), "is required");
    ep.address = r.host_port(addr, f.child("address"));
    auto hp = parse_host_port(ep.address);
    ep.host = std::string(hp->host);
    ep.port = hp->port;
    if (ep.port == 0) fail(r.source, addr, f.child("address"), "port must not be 0");
    if (!seen.insert(ep.address).second)
      fail(r.source, addr, f.child("address"), "duplicate endpoint " + ep.address);
    if (auto n = f.take("engine")) {
      ep.engine = r.string(n, f.child("engine"));
      if (ep.engine != "vllm" && ep.engine != "sglang" && ep.engine != "trtllm-serve")
        fail(r.source, n, f.child("engine"),
             "unknown engine '" + ep.engine + "' (expected vllm, sglang or trtllm-serve)");
    }
    if (auto n = f.take("labels")) {
      if (!n.IsMap()) fail(r.source, n, f.child("labels"), "expected a mapping of label: value");
      for (const auto& kv : n) {
        auto key = r.string(kv.first, f.child("labels"));
        ep.labels[key] = r.scalar(kv.second, f.child("labels") + "." + key);
      }
    }
  });
}

void read_objectives(const Reader& r, const YAML::Node& node, std::vector<ObjectiveConfig>& out) {
  std::set<std::string> seen;
  read_list(r, node, "objectives", out, [&](Fields& f, const YAML::Node& item, ObjectiveConfig& o) {
    o.name = unique_key(r, f, item, "name", seen, "objective");
    if (auto n = f.take("priority")) {
      auto v = r.integer(n, f.child("priority"));
      if (v < -1000000 || v > 1000000)
        fail(r.source, n, f.child("priority"), "must be between -1000000 and 1000000");
      o.priority = static_cast<int>(v);
    }
    if (auto n = f.take("ttl")) {
      o.ttl = r.duration(n, f.child("ttl"));
      if (o.ttl->count() <= 0) fail(r.source, n, f.child("ttl"), "must be greater than zero");
    }
  });
}

void read_flows(const Reader& r, const YAML::Node& node, std::vector<FlowConfig>& out) {
  std::set<std::string> seen;
  read_list(r, node, "flows", out, [&](Fields& f, const YAML::Node& item, FlowConfig& fl) {
    fl.id = unique_key(r, f, item, "id", seen, "flow");
    if (auto n = f.take("weight")) {
      fl.weight = r.number(n, f.child("weight"));
      if (!(fl.weight > 0) || fl.weight > 1e6)
        fail(r.source, n, f.child("weight"), "must be greater than 0 and at most 1000000");
    }
  });
}

void read_plugins(const Reader& r, const YAML::Node& node, std::vector<PluginSpec>& out) {
  std::set<std::string> names;
  read_list(r, node, "plugins", out, [&](Fields& f, const YAML::Node& item, PluginSpec& p) {
    p.line = item.Mark().line + 1;
    auto type = f.take("type");
    if (!type) fail(r.source, item, f.child("type"), "is required");
    p.type = r.string(type, f.child("type"));
    p.name = p.type;
    auto name = f.take("name");
    if (name) p.name = r.string(name, f.child("name"));
    if (!names.insert(p.name).second)
      fail(r.source, name ? name : type, f.child(name ? "name" : "type"),
           "duplicate plugin name '" + p.name + "'");
    if (auto n = f.take("parameters")) {
      if (!n.IsMap() && !n.IsNull()) fail(r.source, n, f.child("parameters"), "expected a mapping");
      p.parameters = n;
    }
  });
}

void read_profiles(const Reader& r, const YAML::Node& node, const std::vector<PluginSpec>& plugins,
                   std::vector<SchedulingProfileSpec>& out) {
  std::set<std::string> names;
  read_list(r, node, "schedulingProfiles", out,
            [&](Fields& f, const YAML::Node& item, SchedulingProfileSpec& prof) {
    prof.name = unique_key(r, f, item, "name", names, "profile");
    auto list = f.take("plugins");
    if (!list) return;
    read_list(r, list, f.child("plugins"), prof.plugins,
              [&](Fields& pf, const YAML::Node& entry, ProfilePluginRef& ref) {
      ref.line = entry.Mark().line + 1;
      auto pr = pf.take("pluginRef");
      if (!pr) fail(r.source, entry, pf.child("pluginRef"), "is required");
      ref.plugin_ref = r.string(pr, pf.child("pluginRef"));
      bool known = false;
      for (const auto& p : plugins) known = known || p.name == ref.plugin_ref;
      if (!known)
        fail(r.source, pr, pf.child("pluginRef"),
             "refers to '" + ref.plugin_ref + "', which is not in plugins");
      if (auto w = pf.take("weight")) {
        ref.weight = r.number(w, pf.child("weight"));
        if (*ref.weight < 0) fail(r.source, w, pf.child("weight"), "must not be negative");
      }
    });
  });
}

Config parse(const YAML::Node& root, const std::string& source) {
  Config c;
  c.source = source;
  Reader r{c.source};
  if (root.IsNull()) return c;  // an empty file is a valid, all-defaults config
  Fields f(c.source, root, "");
  if (auto n = f.take("apiVersion")) {
    c.api_version = r.string(n, "apiVersion");
    if (c.api_version != "inference.networking.x-k8s.io/v1alpha1" &&
        c.api_version != "llm-d.ai/v1alpha1")
      fail(c.source, n, "apiVersion",
           "unsupported '" + c.api_version +
               "' (expected inference.networking.x-k8s.io/v1alpha1 or llm-d.ai/v1alpha1)");
  }
  if (auto n = f.take("kind")) {
    c.kind = r.string(n, "kind");
    if (c.kind != "EndpointPickerConfig")
      fail(c.source, n, "kind", "unsupported '" + c.kind + "' (expected EndpointPickerConfig)");
  }
  if (auto n = f.take("server")) read_server(r, n, c.server);
  if (auto n = f.take("endpoints")) read_endpoints(r, n, c.endpoints);
  if (auto n = f.take("objectives")) read_objectives(r, n, c.objectives);
  if (auto n = f.take("flows")) read_flows(r, n, c.flows);
  if (auto n = f.take("plugins")) read_plugins(r, n, c.plugins);
  if (auto n = f.take("schedulingProfiles")) read_profiles(r, n, c.plugins, c.scheduling_profiles);
  if (auto n = f.take("featureGates")) {
    r.sequence(n, "featureGates");
    for (std::size_t i = 0; i < n.size(); ++i)
      c.feature_gates.push_back(r.string(n[i], "featureGates[" + std::to_string(i) + "]"));
  }
  auto mapping = [&](const char* key, YAML::Node& out) {
    if (auto n = f.take(key)) {
      if (!n.IsMap()) fail(c.source, n, key, "expected a mapping");
      out = n;
    }
  };
  mapping("flowControl", c.flow_control);
  mapping("saturationDetector", c.saturation_detector);
  mapping("parser", c.parser);
  mapping("data", c.data);
  f.finish();
  return c;
}

}  // namespace

Config load_config_string(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::ostringstream out;
    out << source << ":" << e.mark.line + 1 << ": (syntax): " << e.msg;
    throw ConfigError(out.str());
  }
  return parse(root, source);
}

Config load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return load_config_string(text.str(), path);
}

}  // namespace sluice::config
