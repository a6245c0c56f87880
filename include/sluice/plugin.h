// The base of every scheduling plugin built by name from config (GIE's
// `plugins:` list) and the signature of its factory. The registry that
// holds the factories of every extension kind is sluice/extensions.h
// (registered explicitly, as Envoy's REGISTER_FACTORY but without static
// self-registration, which static libraries drop when nobody references it).
#pragma once

#include <functional>
#include <memory>
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

}  // namespace sluice
