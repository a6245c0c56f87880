#include "sluice/plugin_params.h"

#include <cmath>
#include <sstream>

#include "config/config.h"

namespace sluice {

PluginParams::PluginParams(YAML::Node node, std::string source, std::string path, int line)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)), line_(line) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) fail("", "expected a mapping");
}

int PluginParams::line_of(const std::string& key) const {
  if (!key.empty() && node_ && node_.IsMap()) {
    // The key's own mark: the value's mark is where a scalar starts.
    for (auto it = node_.begin(); it != node_.end(); ++it)
      if (it->first.Scalar() == key) return it->first.Mark().line + 1;
  }
  if (node_ && node_.Mark().line >= 0) return node_.Mark().line + 1;
  return line_;
}

void PluginParams::fail(const std::string& key, const std::string& message) const {
  std::ostringstream out;
  out << source_ << ":" << line_of(key) << ": " << path_;
  if (!key.empty()) out << "." << key;
  out << ": " << message;
  throw config::ConfigError(out.str());
}

YAML::Node PluginParams::take(const std::string& key) {
  // Absent is an undefined node (a default-constructed one is a defined null).
  if (!node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& map = node_;  // const lookup: does not insert the key
  YAML::Node n = map[key];
  if (!n.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  used_.insert(key);
  return n;
}

std::optional<double> PluginParams::number(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
    fail(key, "expected a number, got '" +
                  (n.IsScalar() ? n.Scalar() : std::string("(not a scalar)")) + "'");
  return v;
}

std::optional<std::int64_t> PluginParams::integer(const std::string& key, std::int64_t min,
                                                  std::int64_t max) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  long long v = 0;
  if (!n.IsScalar() || !YAML::convert<long long>::decode(n, v))
    fail(key, "expected a whole number, got '" +
                  (n.IsScalar() ? n.Scalar() : std::string("(not a scalar)")) + "'");
  if (v < min || v > max)
    fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
  return static_cast<std::int64_t>(v);
}

std::optional<bool> PluginParams::boolean(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(key, "expected true or false");
  return v;
}

std::optional<std::string> PluginParams::string(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  if (!n.IsScalar()) fail(key, "expected a string");
  return n.Scalar();
}

std::optional<std::vector<std::string>> PluginParams::string_list(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  if (!n.IsSequence()) fail(key, "expected a list of strings");
  std::vector<std::string> out;
  for (const auto& item : n) {
    if (!item.IsScalar()) fail(key, "expected a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

std::optional<std::map<std::string, std::string>> PluginParams::string_map(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  if (!n.IsMap()) fail(key, "expected a mapping of strings");
  std::map<std::string, std::string> out;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->second.IsScalar()) fail(key + "." + it->first.Scalar(), "expected a string");
    out[it->first.Scalar()] = it->second.Scalar();
  }
  return out;
}

std::optional<PluginParams> PluginParams::mapping(const std::string& key) {
  YAML::Node n = take(key);
  if (!n) return std::nullopt;
  if (!n.IsMap()) fail(key, "expected a mapping");
  return PluginParams(n, source_, path_ + "." + key, n.Mark().line + 1);
}

void PluginParams::finish() const {
  if (!node_ || !node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (!used_.count(key)) fail(key, "unknown field");
  }
}

}  // namespace sluice
