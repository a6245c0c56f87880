// The base of every plugin built by name from config (GIE's `plugins:`
// list), and the factory registry that builds them (Envoy's
// REGISTER_FACTORY, registered explicitly: static libraries drop
// self-registering objects that nobody references).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/plugin_params.h"

namespace sluice {

class Plugin {
 public:
  virtual ~Plugin() = default;
  // The GIE `type`, e.g. "queue-scorer".
  virtual std::string_view type() const = 0;
  // The instance name (the config's `name`, defaulting to the type).
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

 private:
  std::string name_;
};

// What a factory may look at besides its parameters: the plugins built
// before it (producers before scorers, scorers before deciders, deciders
// before profile handlers), by instance name or type.
class PluginContext {
 public:
  virtual ~PluginContext() = default;
  virtual Plugin* find(std::string_view name) const = 0;
  virtual std::vector<Plugin*> of_type(std::string_view type) const = 0;
};

// Builds one instance from its parameters. Throws (config::ConfigError via
// PluginParams::fail) naming the field: plugins are built at startup or
// reload, never on the data plane.
using PluginFactory =
    std::function<std::unique_ptr<Plugin>(PluginParams& params, PluginContext& context)>;

class PluginRegistry {
 public:
  void add(std::string type, PluginFactory factory) {
    factories_[std::move(type)] = std::move(factory);
  }
  const PluginFactory* find(std::string_view type) const {
    auto it = factories_.find(type);
    return it == factories_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const auto& [t, f] : factories_) out.push_back(t);
    return out;
  }

 private:
  std::map<std::string, PluginFactory, std::less<>> factories_;
};

}  // namespace sluice
