// A fixture file's whole text ("" if it cannot be read: the test that needs
// it then fails on its first expectation).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace sluice::test_support {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#ifdef SLUICE_LLMD_FIXTURES_DIR
// A config of test/fixtures/llmd/ (the shapes of llm-d's guides).
inline std::string llmd_fixture(const std::string& name) {
  return read_text(std::string(SLUICE_LLMD_FIXTURES_DIR) + "/" + name);
}
#endif

}  // namespace sluice::test_support
