// The tokens an I/O thread has already verified, so a client that sends the
// same JWT on every request pays one SHA-256 and one hash lookup instead of
// a signature check.
//
// One per I/O thread, used only from that thread: no locks, not thread-safe
// by design. Only accepted tokens are kept (a refused one would let anyone
// fill the table with garbage), each until its "exp", never longer: the
// cache does not extend a token's life, not even by the verifier's leeway.
// The table has a fixed capacity chosen at construction; past it, inserting
// evicts one entry (CLOCK: recently found entries get a second chance), so
// memory does not grow with what clients send. Keys are SHA-256 digests of
// the whole token, so an entry can only be found by presenting the same
// bytes. Call clear() whenever the keys or the JwtOptions change: an entry
// says what the token meant under the ones it was verified with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/crypto.h"
#include "auth/jwt.h"

namespace sluice::auth {

class TokenCache {
 public:
  // `capacity` entries at most (at least 1); all memory for the table is
  // taken here.
  explicit TokenCache(std::size_t capacity = 4096);

  // The key of a token: its SHA-256. Compute it once per request and use it
  // for find and, after a miss and a successful verify_jwt, insert.
  static Digest key_of(std::string_view token) { return sha256(token); }

  // The token verified under `key`, or nullptr. An entry whose expires_at is
  // at or before `now` (unix seconds) is removed and is a miss. The pointer
  // is valid until the next insert or clear. Never throws.
  const VerifiedToken* find(const Digest& key, std::int64_t now) noexcept;

  // Remembers an accepted token until its expires_at. A token without
  // expiry (expires_at 0) or already expired at `now` is not kept, nor is a
  // key already present (the same bytes verify the same way). Never throws:
  // if memory runs out the entry is simply not kept.
  void insert(const Digest& key, const VerifiedToken& token, std::int64_t now) noexcept;

  // Forgets every entry (keys rotated, options reloaded).
  void clear() noexcept;

  std::size_t size() const { return index_.size(); }
  std::size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    Digest key{};
    VerifiedToken token;
    bool used = false;
    bool referenced = false;  // found since the clock hand last passed
  };
  // SHA-256 output is uniform: its first bytes are a good hash already.
  struct DigestHash {
    std::size_t operator()(const Digest& d) const noexcept {
      std::size_t h;
      std::memcpy(&h, d.data(), sizeof h);
      return h;
    }
  };

  void remove(std::uint32_t slot) noexcept;
  // A free slot, evicting one entry when none is free.
  std::uint32_t take_slot(std::int64_t now) noexcept;

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // reserved to capacity: push_back never allocates
  std::unordered_map<Digest, std::uint32_t, DigestHash> index_;
  std::size_t hand_ = 0;
};

}  // namespace sluice::auth
