// API keys for the identity tests: a key made with sluice_auth's own
// generator (the secret and its record), and the header that presents it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "auth/api_keys.h"
#include "flow_control_harness.h"

namespace sluice::test {

struct Key {
  std::string secret;
  auth::KeyRecord record;
};

// `max_tokens` > 0: the key's own maxTokens scope.
inline Key make_key(const std::string& tenant, const std::string& id,
                    std::uint64_t max_tokens = 0) {
  auto k = auth::generate_key(tenant, id);
  EXPECT_TRUE(k);
  if (!k) return {};
  k->record.max_tokens = max_tokens;
  return {k->key, k->record};
}

inline Headers bearer(const std::string& key, Headers more = {}) {
  more.emplace_back("Authorization", "Bearer " + key);
  return more;
}

}  // namespace sluice::test
