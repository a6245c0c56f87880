#include "auth/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace sluice::auth {

Digest sha256(std::string_view data) {
  // Fetched once: with EVP_sha256() every EVP_Digest looks the algorithm up
  // in the provider store again (a lock and a hash lookup per call: most of
  // the cost of hashing a short API key, bench/auth_bench.cc).
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  Digest d{};
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &n, md ? md : EVP_sha256(), nullptr);
  return d;
}

bool constant_time_equal(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool random_bytes(std::uint8_t* out, std::size_t n) {
  return RAND_bytes(out, static_cast<int>(n)) == 1;
}

namespace {
constexpr char kHex[] = "0123456789abcdef";
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}
}  // namespace

std::string to_hex(const Digest& d) {
  std::string s;
  s.reserve(64);
  for (auto b : d) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

bool from_hex(std::string_view hex, Digest& out) {
  if (hex.size() != 64) return false;
  for (std::size_t i = 0; i < 32; ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string base64url_encode(std::string_view data) {
  std::string s;
  s.reserve((data.size() * 4 + 2) / 3);
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(data[k]); };
  for (; i + 3 <= data.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    s.push_back(kB64[v >> 18 & 63]);
    s.push_back(kB64[v >> 12 & 63]);
    s.push_back(kB64[v >> 6 & 63]);
    s.push_back(kB64[v & 63]);
  }
  if (data.size() - i == 1) {
    const std::uint32_t v = byte(i) << 16;
    s.push_back(kB64[v >> 18 & 63]);
    s.push_back(kB64[v >> 12 & 63]);
  } else if (data.size() - i == 2) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    s.push_back(kB64[v >> 18 & 63]);
    s.push_back(kB64[v >> 12 & 63]);
    s.push_back(kB64[v >> 6 & 63]);
  }
  return s;
}

bool base64url_decode(std::string_view in, std::string& out) {
  if (in.size() % 4 == 1) return false;
  out.reserve(out.size() + in.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = b64_value(c);
    if (v < 0) return false;
    acc = (acc << 6 | static_cast<std::uint32_t>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  // The spare bits of the last character must be zero.
  return (acc & ((1u << bits) - 1)) == 0;
}

}  // namespace sluice::auth
