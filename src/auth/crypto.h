// The small cryptographic pieces identity is built from (OpenSSL 3): a
// SHA-256 digest, an equality that does not tell where two digests differ,
// random bytes, and base64url (RFC 4648 §5, the JOSE alphabet without
// padding) both ways.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::auth {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view data);
// Equal in time that depends only on the size (CRYPTO_memcmp).
bool constant_time_equal(const Digest& a, const Digest& b);
// `n` bytes from OpenSSL's CSPRNG; false if it failed (then `out` is unusable).
bool random_bytes(std::uint8_t* out, std::size_t n);

std::string to_hex(const Digest& d);
// 64 hex digits (either case) into `out`; false for anything else.
bool from_hex(std::string_view hex, Digest& out);

std::string base64url_encode(std::string_view data);
// Unpadded base64url into `out` (appended); false on a byte outside the
// alphabet, a '=' anywhere, a length of 1 mod 4, or non-zero spare bits
// (so each value has one encoding).
bool base64url_decode(std::string_view in, std::string& out);

}  // namespace sluice::auth
