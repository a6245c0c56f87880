// The endpoints file (server.endpointsFile) that the watcher re-reads at
// runtime. load_endpoints_file takes a path, so each input is written to a
// file in /dev/shm (memory, not disk) first. ConfigError is the documented
// outcome of a bad file; anything else is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config.h"
#include "finding.h"

namespace {

// One file per process (libFuzzer's -jobs/-fork run several), removed after
// each input: libFuzzer ends a timed run with _Exit, so atexit would not run.
const std::string& scratch_path() {
  static const std::string path =
      "/dev/shm/sluice-fuzz-endpoints-" + std::to_string(::getpid()) + ".yaml";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::abort();  // the harness cannot run, not a finding
  }
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    (void)sluice::config::load_endpoints_file(path);
  } catch (const sluice::config::ConfigError&) {
    // A rejected file: expected.
  } catch (const std::exception& e) {
    std::remove(path.c_str());
    sluice::fuzz::undocumented_exception("load_endpoints_file", e);
  } catch (...) {
    std::remove(path.c_str());
    sluice::fuzz::unknown_exception("load_endpoints_file");
  }
  std::remove(path.c_str());
  return 0;
}
