// A check shared by the JWT and JWKS readers: simdjson's DOM keeps every
// member of an object, so a repeated name is visible, and a reader that
// looked names up would silently take the first. Token headers, claims and
// keys with a repeated member are refused instead (two parsers disagreeing
// about which "alg" or "sub" counts is how ambiguity attacks work).
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace sluice::auth {

// True when two members of `obj` have the same name (byte for byte, after
// unescaping). `scratch` is reused between calls.
inline bool has_duplicate_member(const simdjson::dom::object& obj,
                                 std::vector<std::string_view>& scratch) {
  scratch.clear();
  for (const auto field : obj) scratch.push_back(field.key);
  if (scratch.size() < 2) return false;
  std::sort(scratch.begin(), scratch.end());
  return std::adjacent_find(scratch.begin(), scratch.end()) != scratch.end();
}

}  // namespace sluice::auth
