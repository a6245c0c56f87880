#include "config/reader.h"

#include <sstream>

namespace sluice::config::detail {

// Every error goes through here so that all messages have one shape:
// "FILE:LINE: field.path: what is wrong".
void fail(const std::string& source, const YAML::Node& node, const std::string& path,
          const std::string& what) {
  std::ostringstream out;
  out << source;
  if (node.IsDefined() && node.Mark().line >= 0) out << ":" << node.Mark().line + 1;
  out << ": " << (path.empty() ? "(top level)" : path) << ": " << what;
  throw ConfigError(out.str());
}

}  // namespace sluice::config::detail
