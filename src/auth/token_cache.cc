#include "auth/token_cache.h"

#include <algorithm>

namespace sluice::auth {

TokenCache::TokenCache(std::size_t capacity) : slots_(std::max<std::size_t>(capacity, 1)) {
  free_.reserve(slots_.size());
  // Handed out from slot 0 upwards.
  for (std::size_t i = slots_.size(); i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
  index_.reserve(slots_.size());
}

const VerifiedToken* TokenCache::find(const Digest& key, std::int64_t now) noexcept {
  const auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  Slot& s = slots_[it->second];
  if (s.token.expires_at <= now) {
    remove(it->second);
    return nullptr;
  }
  s.referenced = true;
  return &s.token;
}

void TokenCache::insert(const Digest& key, const VerifiedToken& token, std::int64_t now) noexcept {
  if (token.expires_at <= now || index_.count(key) != 0) return;
  const std::uint32_t i = take_slot(now);
  Slot& s = slots_[i];
  try {
    s.token = token;
    index_.emplace(key, i);
  } catch (...) {
    // Out of memory: the slot stays free, the token is verified again next
    // time.
    free_.push_back(i);
    return;
  }
  s.key = key;
  s.used = true;
  s.referenced = false;
}

void TokenCache::clear() noexcept {
  index_.clear();
  free_.clear();
  for (std::size_t i = slots_.size(); i-- > 0;) {
    slots_[i].used = false;
    slots_[i].referenced = false;
    free_.push_back(static_cast<std::uint32_t>(i));
  }
  hand_ = 0;
}

void TokenCache::remove(std::uint32_t slot) noexcept {
  Slot& s = slots_[slot];
  index_.erase(s.key);
  s.used = false;
  s.referenced = false;
  free_.push_back(slot);
}

std::uint32_t TokenCache::take_slot(std::int64_t now) noexcept {
  if (free_.empty()) {
    // Every slot is in use. CLOCK: an expired entry goes at once, a
    // recently found one loses its mark and is passed over; within two
    // turns of the hand some entry goes.
    for (;;) {
      const auto i = static_cast<std::uint32_t>(hand_);
      hand_ = (hand_ + 1) % slots_.size();
      Slot& s = slots_[i];
      if (s.referenced && s.token.expires_at > now) {
        s.referenced = false;
        continue;
      }
      remove(i);
      break;
    }
  }
  const std::uint32_t i = free_.back();
  free_.pop_back();
  return i;
}

}  // namespace sluice::auth
