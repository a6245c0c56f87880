#include "admin/auth.h"

#include <cstddef>

namespace sluice::admin {

namespace {

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;  // no early exit: time does not tell how much matched
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool bearer_matches(const std::string& authorization, const std::string& token) {
  const std::string prefix = "Bearer ";
  return authorization.rfind(prefix, 0) == 0 &&
         same_token(authorization.substr(prefix.size()), token);
}

}  // namespace sluice::admin
