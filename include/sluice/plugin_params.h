// A plugin's `parameters:` mapping, read field by field with errors that
// name the file, line and field path (config time only: throws).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sluice {

class PluginParams {
 public:
  // `node` may be null (no parameters). `path` names it in messages, e.g.
  // "plugins[prefix-cache-scorer].parameters".
  PluginParams(YAML::Node node, std::string source, std::string path, int line);

  std::optional<double> number(const std::string& key);
  std::optional<std::int64_t> integer(const std::string& key, std::int64_t min, std::int64_t max);
  std::optional<bool> boolean(const std::string& key);
  std::optional<std::string> string(const std::string& key);
  std::optional<std::vector<std::string>> string_list(const std::string& key);
  std::optional<std::map<std::string, std::string>> string_map(const std::string& key);
  // A nested mapping, for parameters with structure of their own.
  std::optional<PluginParams> mapping(const std::string& key);
  // The raw node of `key` (for lists of mappings); marks it used.
  YAML::Node take(const std::string& key);

  // Throws naming `key`'s line (or the mapping's) and full path.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // Every key not read is an error.
  void finish() const;

  const std::string& source() const { return source_; }

 private:
  int line_of(const std::string& key) const;
  YAML::Node node_;
  std::string source_;
  std::string path_;
  int line_;
  std::set<std::string> used_;
};

}  // namespace sluice
