// Jwks::parse (auth/jwks.h) on any document: what a JWKS endpoint, or
// whoever stands between it and sluice, may serve. Oracles: nothing throws,
// nothing aborts; an error comes with a message and a set without one; a set
// holds at most 256 keys, each a real key usable for its alg, found again by
// its kid; every skip reason is printable ASCII of bounded length; a token
// naming each key goes through the real signature check with it (OpenSSL on
// the key as read) and is refused as a bad signature, never kInternal.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "auth/crypto.h"
#include "auth/jwks.h"
#include "auth/jwt.h"
#include "finding.h"

namespace {

using sluice::auth::JwtAlg;
using sluice::auth::JwtError;

[[noreturn]] void violation(const char* what, std::string_view detail = "") {
  std::fprintf(stderr, "FINDING: %s %.300s\n", what, std::string(detail).c_str());
  std::abort();
}

// A JSON string literal of any bytes (the kid came out of JSON, so it is
// valid UTF-8; control bytes, quotes and backslashes are escaped).
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c < 0x20 || c == '"' || c == '\\') {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

JwtAlg alg_for(sluice::auth::KeyType t) {
  switch (t) {
    case sluice::auth::KeyType::kRsa:
      return JwtAlg::kRS256;
    case sluice::auth::KeyType::kEcP256:
      return JwtAlg::kES256;
    case sluice::auth::KeyType::kEd25519:
      return JwtAlg::kEdDSA;
  }
  return JwtAlg::kRS256;
}

// A token naming `key` with a signature of the right size that cannot be
// right.
void verify_with(const sluice::auth::Jwks& set, const sluice::auth::Jwk& key) {
  const JwtAlg alg = alg_for(key.type);
  const std::string header = "{\"alg\":\"" + std::string(sluice::auth::to_string(alg)) +
                             "\",\"kid\":" + json_string(key.kid) + "}";
  const std::size_t sig_size =
      alg == JwtAlg::kRS256 ? static_cast<std::size_t>(EVP_PKEY_get_size(key.key.get())) : 64;
  const std::string token = sluice::auth::base64url_encode(header) + "." +
                            sluice::auth::base64url_encode(R"({"sub":"t","exp":2000000000})") +
                            "." + sluice::auth::base64url_encode(std::string(sig_size, '\x01'));
  sluice::auth::JwtOptions o;
  o.max_token_bytes = 1 << 20;
  sluice::auth::VerifiedToken out;
  const JwtError e = sluice::auth::verify_jwt(token, set, o, 1'700'000'000, out);
  if (e == JwtError::kInternal) violation("kInternal verifying with a key the set accepted");
  if (!key.kid.empty() && e != JwtError::kBadSignature)
    violation("a garbage signature was not a bad signature:", sluice::auth::to_string(e));
}

void check_set(const sluice::auth::Jwks& set) {
  if (set.size() > sluice::auth::kMaxJwksKeys) violation("more than 256 keys");
  for (const auto& key : set.keys()) {
    if (!key.key) violation("a key without an EVP_PKEY");
    if (key.kid.size() > sluice::auth::kMaxKidBytes) violation("a kid over the bound");
    const JwtAlg alg = alg_for(key.type);
    if (!key.usable_for(alg)) violation("a key not usable for its own type's alg");
    if (key.alg && *key.alg != alg) violation("a key whose alg does not fit its type");
    const sluice::auth::Jwk* found = nullptr;
    if (!key.kid.empty() &&
        (set.find(key.kid, alg, found) != sluice::auth::Jwks::Lookup::kFound || found != &key))
      violation("a key not found by its kid", key.kid);
    verify_with(set, key);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view doc(reinterpret_cast<const char*>(data), size);
  try {
    std::string error;
    std::vector<std::string> skipped;
    const auto set = sluice::auth::Jwks::parse(doc, error, &skipped);
    if (!set) {
      if (error.empty()) violation("an error without a message");
      if (!skipped.empty()) violation("keys skipped in a document that is an error");
      return 0;
    }
    if (!error.empty()) violation("a set with an error message", error);
    for (const auto& line : skipped) {
      if (line.empty() || line.size() > 512) violation("a skip reason of odd length", line);
      for (char c : line)
        if (c < 0x20 || c >= 0x7f) violation("a skip reason with a byte unfit for a log", line);
    }
    check_set(*set);
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("Jwks::parse", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("Jwks::parse");
  }
  return 0;
}
