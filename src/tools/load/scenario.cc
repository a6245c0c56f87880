#include "tools/load/scenario.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/units.h"

namespace sluice::load {

namespace {

[[noreturn]] void fail(const std::string& source, const YAML::Node& n, const std::string& path,
                       const std::string& what) {
  std::ostringstream os;
  os << source << ": " << path;
  if (n && n.Mark().line >= 0) os << " (line " << n.Mark().line + 1 << ")";
  os << ": " << what;
  throw ScenarioError(os.str());
}

// yaml-cpp keeps both entries of a repeated key and lookups see the first, so
// the whole document is checked once before it is read: a repeated key, or
// one that is not a plain value, is an error. Each collection is walked once
// (aliases share nodes, even in a cycle).
void check_keys(const std::string& source, const YAML::Node& node, const std::string& path,
                std::set<std::pair<int, int>>& walked) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (!walked.insert({node.Mark().pos, static_cast<int>(node.Type())}).second) return;
  if (node.IsSequence()) {
    std::size_t i = 0;
    for (const auto& item : node)
      check_keys(source, item, path + "[" + std::to_string(i++) + "]", walked);
    return;
  }
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      fail(source, kv.first, path.empty() ? "(top level)" : path,
           "a key must be a plain value, not a list, mapping or null");
    const std::string& key = kv.first.Scalar();
    const std::string child = path.empty() ? key : path + "." + key;
    auto [it, fresh] = first_line.emplace(key, kv.first.Mark().line + 1);
    if (!fresh)
      fail(source, kv.first, child,
           "duplicate key (first at line " + std::to_string(it->second) + ")");
    check_keys(source, kv.second, child, walked);
  }
}

// The keys of a mapping, taken one by one; finish() rejects the rest.
class Fields {
 public:
  Fields(std::string source, YAML::Node node, std::string path)
      : source_(std::move(source)), node_(std::move(node)), path_(std::move(path)) {
    if (!node_.IsMap())
      fail(source_, node_, path_.empty() ? "(top level)" : path_, "expected a mapping");
  }
  YAML::Node take(const std::string& key) {
    taken_.insert(key);
    return node_[key];
  }
  std::string child(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  void finish() const {
    for (const auto& kv : node_) {
      const auto key = kv.first.as<std::string>();
      if (!taken_.count(key)) fail(source_, kv.first, child(key), "unknown field");
    }
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  YAML::Node node_;
  std::string path_;
  std::set<std::string> taken_;
};

std::string scalar(const Fields& f, const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) fail(f.source(), n, path, "expected a value");
  return n.Scalar();
}

double number(const Fields& f, const YAML::Node& n, const std::string& path) {
  const std::string s = scalar(f, n, path);
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    fail(f.source(), n, path, "expected a number, got '" + s + "'");
  }
}

double positive(const Fields& f, const YAML::Node& n, const std::string& path) {
  double v = number(f, n, path);
  if (!(v > 0)) fail(f.source(), n, path, "must be greater than 0");
  return v;
}

std::int64_t integer(const Fields& f, const YAML::Node& n, const std::string& path, std::int64_t lo,
                     std::int64_t hi) {
  double v = number(f, n, path);
  // The range first: converting a double outside int64's range (1e300, inf,
  // nan) to an integer is undefined behaviour.
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != std::trunc(v))
    fail(f.source(), n, path,
         "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<std::int64_t>(v);
}

Duration duration(const Fields& f, const YAML::Node& n, const std::string& path) {
  auto d = config::parse_duration(scalar(f, n, path));
  if (!d) fail(f.source(), n, path, "expected a duration like 500ms, 30s or 2m");
  return *d;
}

bool boolean(const Fields& f, const YAML::Node& n, const std::string& path) {
  const std::string s = scalar(f, n, path);
  if (s == "true") return true;
  if (s == "false") return false;
  fail(f.source(), n, path, "expected true or false");
}

// A number (constant) or {type, ...}.
Distribution distribution(const Fields& parent, const YAML::Node& n, const std::string& path) {
  Distribution d;
  if (n.IsScalar()) {
    d.a = number(parent, n, path);
    if (d.a < 0) fail(parent.source(), n, path, "must not be negative");
    return d;
  }
  Fields f(parent.source(), n, path);
  auto type = f.take("type");
  if (!type)
    fail(f.source(), n, f.child("type"),
         "is required (constant, uniform, normal, lognormal, exponential)");
  const std::string t = scalar(f, type, f.child("type"));
  auto req = [&](const char* key) {
    auto v = f.take(key);
    if (!v) fail(f.source(), n, f.child(key), std::string("is required for type ") + t);
    return number(f, v, f.child(key));
  };
  if (t == "constant") {
    d.kind = Distribution::Kind::kConstant;
    d.a = req("value");
  } else if (t == "uniform") {
    d.kind = Distribution::Kind::kUniform;
    d.a = req("min");
    d.b = req("max");
    if (d.b < d.a) fail(f.source(), n, f.child("max"), "must not be below min");
  } else if (t == "normal") {
    d.kind = Distribution::Kind::kNormal;
    d.a = req("mean");
    d.b = req("stddev");
    if (d.b < 0) fail(f.source(), n, f.child("stddev"), "must not be negative");
  } else if (t == "lognormal") {
    d.kind = Distribution::Kind::kLogNormal;
    d.a = req("median");
    d.b = req("sigma");
    if (d.a <= 0) fail(f.source(), n, f.child("median"), "must be greater than 0");
    if (d.b < 0) fail(f.source(), n, f.child("sigma"), "must not be negative");
  } else if (t == "exponential") {
    d.kind = Distribution::Kind::kExponential;
    d.a = req("mean");
    if (d.a <= 0) fail(f.source(), n, f.child("mean"), "must be greater than 0");
  } else {
    fail(f.source(), type, f.child("type"),
         "unknown distribution '" + t + "' (constant, uniform, normal, lognormal, exponential)");
  }
  if (auto v = f.take("min")) {
    if (t != "uniform") d.min = number(f, v, f.child("min"));
  }
  if (auto v = f.take("max")) {
    if (t != "uniform") d.max = number(f, v, f.child("max"));
  }
  if (t == "uniform") {
    d.min = d.a;
    d.max = d.b;
  }
  if (d.a < 0) fail(f.source(), n, path, "must not be negative");
  f.finish();
  return d;
}

Arrival arrival(const Fields& parent, const YAML::Node& n, const std::string& path) {
  Fields f(parent.source(), n, path);
  Arrival a;
  auto type = f.take("type");
  if (!type) fail(f.source(), n, f.child("type"), "is required (poisson, constant, closed)");
  const std::string t = scalar(f, type, f.child("type"));
  if (t == "poisson" || t == "constant") {
    a.kind = t == "poisson" ? Arrival::Kind::kPoisson : Arrival::Kind::kConstant;
    auto r = f.take("rate");
    if (!r) fail(f.source(), n, f.child("rate"), "is required (requests per second)");
    a.rate = positive(f, r, f.child("rate"));
  } else if (t == "closed") {
    a.kind = Arrival::Kind::kClosed;
    auto c = f.take("clients");
    if (!c) fail(f.source(), n, f.child("clients"), "is required (concurrent clients)");
    a.clients = static_cast<int>(integer(f, c, f.child("clients"), 1, 10000));
    if (auto th = f.take("think")) a.think = duration(f, th, f.child("think"));
  } else {
    fail(f.source(), type, f.child("type"),
         "unknown arrival '" + t + "' (poisson, constant, closed)");
  }
  f.finish();
  return a;
}

FlowSpec flow(const Fields& parent, const YAML::Node& n, const std::string& path) {
  Fields f(parent.source(), n, path);
  FlowSpec s;
  auto name = f.take("name");
  if (!name) fail(f.source(), n, f.child("name"), "is required");
  s.name = scalar(f, name, f.child("name"));
  s.fairness_id = s.name;
  if (auto v = f.take("fairnessId")) s.fairness_id = scalar(f, v, f.child("fairnessId"));
  if (auto v = f.take("objective")) s.objective = scalar(f, v, f.child("objective"));
  if (auto v = f.take("headers")) {
    Fields h(f.source(), v, f.child("headers"));
    for (const auto& kv : v) {
      const auto key = kv.first.as<std::string>();
      h.take(key);
      s.headers.emplace_back(key, scalar(h, kv.second, h.child(key)));
    }
  }
  if (auto v = f.take("weight")) s.weight = positive(f, v, f.child("weight"));
  s.group = s.objective;
  if (auto v = f.take("group")) s.group = scalar(f, v, f.child("group"));
  auto arr = f.take("arrival");
  if (!arr) fail(f.source(), n, f.child("arrival"), "is required");
  s.arrival = arrival(f, arr, f.child("arrival"));
  if (auto v = f.take("promptTokens"))
    s.prompt_tokens = distribution(f, v, f.child("promptTokens"));
  if (auto v = f.take("maxTokens")) s.max_tokens = distribution(f, v, f.child("maxTokens"));
  if (auto v = f.take("sharedPrefixShare")) {
    s.shared_prefix_share = number(f, v, f.child("sharedPrefixShare"));
    if (s.shared_prefix_share < 0 || s.shared_prefix_share > 1)
      fail(f.source(), v, f.child("sharedPrefixShare"), "must be from 0 to 1");
  }
  if (auto v = f.take("stream")) s.stream = boolean(f, v, f.child("stream"));
  if (auto v = f.take("start")) s.start = duration(f, v, f.child("start"));
  if (auto v = f.take("stop")) s.stop = duration(f, v, f.child("stop"));
  if (s.stop && *s.stop <= s.start) fail(f.source(), n, f.child("stop"), "must be after start");
  if (auto v = f.take("phases")) {
    if (!v.IsSequence()) fail(f.source(), v, f.child("phases"), "expected a list");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = f.child("phases") + "[" + std::to_string(i) + "]";
      Fields pf(f.source(), v[i], p);
      Phase ph;
      auto at = pf.take("at");
      if (!at) fail(f.source(), v[i], pf.child("at"), "is required");
      ph.at = duration(pf, at, pf.child("at"));
      if (auto r = pf.take("rate")) {
        if (s.arrival.kind == Arrival::Kind::kClosed)
          fail(f.source(), r, pf.child("rate"), "a closed-loop flow changes clients, not rate");
        ph.rate = positive(pf, r, pf.child("rate"));
      }
      if (auto c = pf.take("clients")) {
        if (s.arrival.kind != Arrival::Kind::kClosed)
          fail(f.source(), c, pf.child("clients"), "an open-loop flow changes rate, not clients");
        ph.clients = static_cast<int>(integer(pf, c, pf.child("clients"), 1, 10000));
      }
      if (auto st = pf.take("stop")) ph.stop = boolean(pf, st, pf.child("stop"));
      if (!ph.rate && !ph.clients && !ph.stop)
        fail(f.source(), v[i], p, "needs rate, clients or stop: true");
      if (!s.phases.empty() && ph.at <= s.phases.back().at)
        fail(f.source(), at, pf.child("at"), "phases must be in time order");
      pf.finish();
      s.phases.push_back(ph);
    }
  }
  f.finish();
  return s;
}

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  std::set<std::pair<int, int>> walked;
  check_keys(source, root, "", walked);
  Fields f(source, root, "");
  Scenario s;
  if (auto v = f.take("name")) s.name = scalar(f, v, "name");
  if (auto v = f.take("description")) s.description = scalar(f, v, "description");
  if (auto v = f.take("target")) {
    s.target = scalar(f, v, "target");
    if (s.target.rfind("http://", 0) != 0 && s.target.rfind("https://", 0) != 0)
      fail(source, v, "target", "must start with http:// or https://");
  }
  if (auto v = f.take("path")) {
    s.path = scalar(f, v, "path");
    if (s.path != "/v1/completions" && s.path != "/v1/chat/completions")
      fail(source, v, "path", "must be /v1/completions or /v1/chat/completions");
  }
  if (auto v = f.take("model")) s.model = scalar(f, v, "model");
  if (auto v = f.take("duration")) s.duration = duration(f, v, "duration");
  if (s.duration <= Duration::zero()) fail(source, root, "duration", "must be greater than 0");
  if (auto v = f.take("maxRequests"))
    s.max_requests = static_cast<std::uint64_t>(integer(f, v, "maxRequests", 1, 100000000));
  if (auto v = f.take("timeout")) s.timeout = duration(f, v, "timeout");
  if (auto v = f.take("drain")) s.drain = duration(f, v, "drain");
  if (auto v = f.take("warmup")) s.warmup = duration(f, v, "warmup");
  if (s.warmup >= s.duration) fail(source, root, "warmup", "must be shorter than duration");
  if (auto v = f.take("seed"))
    s.seed = static_cast<std::uint64_t>(integer(f, v, "seed", 0, 1ll << 53));
  if (auto v = f.take("maxConnections"))
    s.max_connections = static_cast<int>(integer(f, v, "maxConnections", 1, 60000));
  if (auto v = f.take("sharedPrefixes")) {
    Fields p(source, v, "sharedPrefixes");
    if (auto c = p.take("count"))
      s.shared_prefix_count = static_cast<int>(integer(p, c, "sharedPrefixes.count", 1, 10000));
    if (auto t = p.take("tokens"))
      s.shared_prefix_tokens =
          static_cast<std::uint64_t>(integer(p, t, "sharedPrefixes.tokens", 1, 1000000));
    p.finish();
  }
  auto flows = f.take("flows");
  if (!flows || !flows.IsSequence() || flows.size() == 0)
    fail(source, flows ? flows : root, "flows", "needs at least one flow");
  std::set<std::string> names;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const std::string path = "flows[" + std::to_string(i) + "]";
    s.flows.push_back(flow(f, flows[i], path));
    if (!names.insert(s.flows.back().name).second)
      fail(source, flows[i], path + ".name", "duplicate flow name '" + s.flows.back().name + "'");
  }
  f.finish();
  return s;
}

Scenario load_scenario_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ScenarioError(path + ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path);
}

}  // namespace sluice::load
