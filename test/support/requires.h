// What a test needs from the machine (a program, a package, files next to
// the project), and what happens when it is missing: one rule for every
// test. `make test` sets SLUICE_TESTS_STRICT=1: there a missing dependency
// FAILS the test, naming it (scripts/install-deps.sh installs every one, so
// on a machine it set up nothing may skip). Elsewhere (`make check`, a test
// binary run by hand) the test is SKIPPED, saying what is missing and that
// `make test` would fail. docs/testing.md lists the dependencies.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace sluice::test {

// SLUICE_TESTS_STRICT set to anything but "" or "0".
inline bool strict_tests() {
  const char* v = std::getenv("SLUICE_TESTS_STRICT");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace sluice::test

// In a test body or SetUp(): unless `available`, fails (strict) or skips
// the test, naming `what` is missing and how to get it (`how`). Returns from
// the calling function either way.
#define SLUICE_REQUIRE(available, what, how)                                                \
  do {                                                                                      \
    if (!(available)) {                                                                     \
      if (::sluice::test::strict_tests())                                                   \
        GTEST_FAIL() << "missing test dependency: " << what << " (" << how                  \
                     << "); SLUICE_TESTS_STRICT is set (make test): a missing dependency "  \
                        "fails the run";                                                    \
      else                                                                                  \
        GTEST_SKIP() << "missing test dependency: " << what << " (" << how                  \
                     << "); skipped here, make test (SLUICE_TESTS_STRICT=1) fails instead"; \
    }                                                                                       \
  } while (0)
