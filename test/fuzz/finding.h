// Reporting an exception a loader does not document: print what escaped and
// abort, so libFuzzer saves the input as a crash artifact.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

namespace sluice::fuzz {

[[noreturn]] inline void undocumented_exception(const char* loader, const std::exception& e) {
  std::fprintf(stderr, "FINDING: %s threw an undocumented %s: %s\n", loader, typeid(e).name(),
               e.what());
  std::abort();
}

[[noreturn]] inline void unknown_exception(const char* loader) {
  std::fprintf(stderr, "FINDING: %s threw something that is not a std::exception\n", loader);
  std::abort();
}

}  // namespace sluice::fuzz
