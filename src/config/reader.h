// The config readers' shared pieces (config.cc, auth_config.cc): the one
// shape of every error, a mapping read field by field with unknown fields
// refused, typed scalars, lists of mappings. Internal to src/config/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/units.h"

namespace sluice::config::detail {

// Every error goes through here so that all messages have one shape:
// "FILE:LINE: field.path: what is wrong".
[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& what);

// The contents of `path`, at most `max_bytes` (config.cc).
std::string read_bounded(const std::string& path, bool allow_streams,
                         std::size_t max_bytes = kMaxFileBytes);

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

  std::string child(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

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
    if (used == 0 || used != s.size())
      fail(source, n, path, "expected an integer, got '" + s + "'");
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
    // stod reads "nan" and "inf" too: no field means them, and a NaN or
    // infinite price, weight or share would poison what is computed from
    // it (a NaN VTC counter sorts before every other).
    if (!std::isfinite(v)) fail(source, n, path, "expected a finite number, got '" + s + "'");
    return v;
  }
  bool boolean(const YAML::Node& n, const std::string& path) const {
    auto s = scalar(n, path);
    if (s == "true") return true;
    if (s == "false") return false;
    fail(source, n, path, "expected true or false, got '" + s + "'");
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
void read_list(const Reader& r, const YAML::Node& node, const std::string& list,
               std::vector<Item>& out, ReadItem&& read_item) {
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
inline std::string unique_key(const Reader& r, Fields& f, const YAML::Node& item,
                              const std::string& key, std::set<std::string>& seen,
                              const std::string& what) {
  auto n = f.take(key);
  if (!n) fail(r.source, item, f.child(key), "is required");
  auto value = r.string(n, f.child(key));
  if (!seen.insert(value).second)
    fail(r.source, n, f.child(key), "duplicate " + what + " '" + value + "'");
  return value;
}

// A duration that must be greater than zero.
inline nanoseconds positive(const Reader& r, const YAML::Node& n, const std::string& path,
                            nanoseconds v) {
  if (v.count() <= 0) fail(r.source, n, path, "must be greater than zero");
  return v;
}

}  // namespace sluice::config::detail
