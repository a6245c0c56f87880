#include "admin/auth.h"

#include <cstddef>

#include "auth/authenticator.h"

namespace sluice::admin {

namespace {

bool same_token(std::string_view a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;  // no early exit: time does not tell how much matched
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

// The scheme as the data plane reads it (auth::bearer_token): any case,
// as RFC 7235 says of auth-schemes.
bool bearer_matches(const std::string& authorization, const std::string& token) {
  const std::string_view presented = auth::bearer_token(authorization);
  return !presented.empty() && same_token(presented, token);
}

}  // namespace sluice::admin
