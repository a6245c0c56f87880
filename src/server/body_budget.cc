#include "server/body_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace sluice::server {

namespace {

// A cgroup's memory limit in bytes, or 0 when the file is absent or says
// "max" (no limit).
std::uint64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text[0] < '0' || text[0] > '9') return 0;
  return std::strtoull(text.c_str(), nullptr, 10);
}

}  // namespace

std::uint64_t default_body_budget(std::uint64_t max_body_bytes) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t memory = pages > 0 && page > 0
                             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                             : 4ull << 30;
  // cgroup v2, then v1 (whose "no limit" is a huge number, above the
  // machine's memory, so the smaller of the two is right either way).
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (const std::uint64_t limit = cgroup_limit(path); limit > 0) memory = std::min(memory, limit);
  }
  return std::max(memory / 4, max_body_bytes);
}

}  // namespace sluice::server
