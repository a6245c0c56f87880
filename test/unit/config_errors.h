// The message of the configuration error a load or a build raises: what
// the bad-input tests of every layer compare.
#pragma once

#include <string>
#include <utility>

#include "config/config.h"

namespace sluice::unit {

// Calls f(); the ConfigError's message, or `none` when nothing was thrown.
template <class F>
std::string config_error_of(F&& f, std::string none = "") {
  try {
    std::forward<F>(f)();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return none;
}

// load_config_string(text, "test.yaml")'s error, or "" if it loaded.
inline std::string load_error(const std::string& text) {
  return config_error_of([&] { config::load_config_string(text, "test.yaml"); });
}

}  // namespace sluice::unit
