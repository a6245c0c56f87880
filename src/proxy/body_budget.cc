#include "proxy/body_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace sluice::proxy {

namespace {

// A cgroup's memory limit in bytes, or 0 when the file is absent or says
// "max" (no limit).
std::uint64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text[0] < '0' || text[0] > '9') return 0;
  return std::strtoull(text.c_str(), nullptr, 10);
}

// The smallest memory limit on this process's cgroup and its ancestors
// (v2 memory.max, v1 memory.limit_in_bytes), found through
// /proc/self/cgroup: outside a cgroup namespace (a systemd service) the
// files at the hierarchy's root are not the process's. 0 when none is set.
std::uint64_t own_cgroup_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::uint64_t smallest = 0;
  // `base` + `path` ("/a/b"), then each ancestor ("/a", "") of it.
  auto consider = [&](const std::string& base, std::string path, const char* file) {
    while (true) {
      if (const std::uint64_t limit = cgroup_limit((base + path + "/" + file).c_str()); limit > 0)
        smallest = smallest == 0 ? limit : std::min(smallest, limit);
      if (path.empty()) break;
      path.resize(path.rfind('/'));
    }
  };
  for (std::string line; std::getline(in, line);) {
    // "ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos) continue;
    if (path == "/") path.clear();
    if (controllers.empty()) {
      consider("/sys/fs/cgroup", path, "memory.max");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      consider("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
    }
  }
  return smallest;
}

}  // namespace

std::uint64_t default_body_budget(std::uint64_t max_body_bytes) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t memory = pages > 0 && page > 0
                             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                             : 4ull << 30;
  // A cgroup's limit when there is one (v1's "no limit" is a huge number,
  // above the machine's memory, so the smaller of the two is right either
  // way); in a cgroup namespace the root files are the process's own.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (const std::uint64_t limit = cgroup_limit(path); limit > 0) memory = std::min(memory, limit);
  }
  if (const std::uint64_t limit = own_cgroup_limit(); limit > 0) memory = std::min(memory, limit);
  return std::max(memory / 4, max_body_bytes);
}

}  // namespace sluice::proxy
