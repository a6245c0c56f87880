// A quota lease reply (fleet/quota_leases.h) of any shape: what Redis, or
// whoever answers on its address, may send back for a lease script. The
// bytes build a reply tree (type, integer, string, elements; depth and
// width bounded) and the ask it answers. Oracles: nothing throws, nothing
// aborts; a reply is taken only as four integers with 0 <= grant <= the
// ask's want; a taken grant, applied to a ledger, never lets it hold more
// than the grant (every reservation it then admits fits the lease).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "finding.h"
#include "fleet/quota_leases.h"

namespace {

using sluice::fleet::RedisReply;

[[noreturn]] void violation(const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "FINDING: %s (%lld, %lld)\n", what, a, b);
  std::abort();
}

struct Bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  long long integer() {
    // Small values most of the time, the edges of a long long sometimes.
    switch (byte() % 6) {
      case 0:
        return -1;
      case 1:
        return static_cast<long long>(byte()) * 100;
      case 2:
        return INT64_MAX;
      case 3:
        return INT64_MIN;
      default: {
        long long v = 0;
        for (int i = 0; i < 3; ++i) v = (v << 8) | byte();
        return v;
      }
    }
  }
};

RedisReply build(Bytes& b, int depth) {
  RedisReply r;
  switch (b.byte() % 6) {
    case 0:
      r.type = RedisReply::Type::kNil;
      break;
    case 1:
      r.type = RedisReply::Type::kInteger;
      r.integer = b.integer();
      break;
    case 2:
    case 3:
      r.type = b.byte() % 2 ? RedisReply::Type::kString : RedisReply::Type::kError;
      for (int i = b.byte() % 16; i > 0; --i) r.str += static_cast<char>(b.byte());
      break;
    default:
      r.type = RedisReply::Type::kArray;
      if (depth < 3)
        for (int i = b.byte() % 7; i > 0; --i) r.elements.push_back(build(b, depth + 1));
      break;
  }
  return r;
}

sluice::quota::Millis g_now = 1'796'601'600'000;
sluice::quota::Millis now_ms() { return g_now; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes b{data, size};
  sluice::quota::LeaseAsk ask;
  ask.want = static_cast<std::uint64_t>(b.byte()) * 10;
  ask.amount = 1000;
  ask.now = g_now;
  if (b.byte() % 2) {
    ask.period.calendar = sluice::quota::Calendar::kDay;
  } else {
    ask.period.window = 60'000;
    ask.bucket_width = 938;
    ask.buckets = 65;
  }
  const RedisReply reply = build(b, 0);
  const auto g = sluice::fleet::parse_lease_reply(reply, ask, g_now + 1000);
  if (!g) return 0;
  if (g->lease > ask.want) violation("grant above want", g->lease, ask.want);
  // Applied to a ledger: what it then admits stays within the grant.
  sluice::quota::Ledger ledger(now_ms);
  ledger.set_fleet_mode(sluice::quota::FleetMode::kLeased, 3);
  sluice::quota::LimitDef d;
  d.name = "tpm";
  d.amount = 1000;
  d.period = ask.period;
  ledger.set_owner("t:x", {d});
  auto limits = ledger.find("t:x");
  auto asks = ledger.lease_asks(g_now, 10'000);
  // Not busy yet: a first request makes it so, then the grant lands.
  auto first = ledger.reserve({limits.get()}, "m", {1, 0}, {}, g_now);
  (void)first;
  asks = ledger.lease_asks(g_now, 10'000);
  if (asks.size() != 1) violation("a limit short of lease was not asked for", asks.size());
  ledger.lease_granted(asks[0], *g);
  std::uint64_t held = 0;
  std::vector<sluice::quota::Reservation> kept;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t n = 1 + b.byte();
    auto a = ledger.reserve({limits.get()}, "m", {n, 0}, {}, g_now);
    if (a.refused) continue;
    held += n;
    kept.push_back(std::move(a.reservation));
  }
  if (held > g->lease) violation("held more than the lease", held, g->lease);
  return 0;
}
