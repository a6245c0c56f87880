#include "fleet/quota_leases.h"

#include <algorithm>

namespace sluice::fleet {

namespace {

using quota::Calendar;
using quota::LeaseAsk;
using quota::LeaseGrant;
using quota::Millis;

// KEYS[1] the limit's hash. ARGV: 1 writer, 2 now (unix ms), 3 's' sliding
// or 'c' calendar, 4 bucket width | the period's start, 5 buckets | the
// previous period's start, 6 amount, 7 want, 8 the lease's expiry (unix
// ms), 9 the key's expiry (ms from now), 10 '1' if an operator reset the
// limit (everyone else's spend goes; leases stay), 11 the spend the writer
// settled since its last grant (written now: it leaves its lease for the
// spend), then (bucket, spend) pairs: the writer's own, all of it (its
// other buckets are dropped, but a calendar limit's previous period, whose
// excess carries). Returns {grant, spend in the window, others' leases,
// oldest bucket counted (-1: none)}. The grant is at least what the
// writer's lease still held beside that spend (up to what it wants): it
// may have admitted against it while this script was on its way, and the
// others were never granted it.
constexpr const char* kLeaseScript = R"lua(
local h, me, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
local sliding = ARGV[3] == 's'
local a4, a5 = tonumber(ARGV[4]), tonumber(ARGV[5])
local amount, want = tonumber(ARGV[6]), tonumber(ARGV[7])
local reset = ARGV[10] == '1'
local pushed = tonumber(ARGV[11])
local own = {}
for i = 12, #ARGV - 1, 2 do
  own['b:' .. ARGV[i] .. ':' .. me] = true
  redis.call('HSET', h, 'b:' .. ARGV[i] .. ':' .. me, ARGV[i + 1])
end
local suffix = ':' .. me
local all = redis.call('HGETALL', h)
local used, prev, others, oldest, held = 0, 0, 0, -1, 0
local first = 0
if sliding then first = math.floor(now / a4) - a5 + 1 end
local dead = {}
local mine = 'l:' .. me
for i = 1, #all - 1, 2 do
  local f, v = all[i], all[i + 1]
  local n = tonumber(v)
  local kind = string.sub(f, 1, 2)
  if kind == 'b:' then
    local idx = tonumber(string.match(f, '^b:(%-?%d+):'))
    if idx == nil or n == nil then
      dead[#dead + 1] = f
    elseif not own[f] and (reset or (string.sub(f, -#suffix) == suffix and
                                    (sliding or idx ~= a5))) then
      dead[#dead + 1] = f
    elseif sliding then
      if idx >= first then
        used = used + n
        if oldest < 0 or idx < oldest then oldest = idx end
      else
        dead[#dead + 1] = f
      end
    elseif idx >= a4 then
      used = used + n
    elseif idx == a5 then
      prev = prev + n
    else
      dead[#dead + 1] = f
    end
  elseif kind == 'l:' then
    local g, e = string.match(v, '^(%d+) (%d+)$')
    if f == mine then
      if g and tonumber(e) > now then held = tonumber(g) end
    elseif g and tonumber(e) > now then
      others = others + tonumber(g)
    else
      dead[#dead + 1] = f
    end
  else
    dead[#dead + 1] = f
  end
end
if prev > amount then used = used + prev - amount end
for i = 1, #dead, 500 do
  redis.call('HDEL', h, unpack(dead, i, math.min(i + 499, #dead)))
end
local grant = amount - used - others
if grant > want then grant = want end
local floor = held - pushed
if floor > want then floor = want end
if grant < floor then grant = floor end
if grant < 0 then grant = 0 end
redis.call('HSET', h, mine, string.format('%d %d', grant, tonumber(ARGV[8])))
redis.call('PEXPIRE', h, ARGV[9])
return {grant, used, others, oldest}
)lua";

// Lua's numbers are doubles: amounts past 2^53 are sent as 2^53 (9e15
// tokens, or 9e9 of a currency in millionths: no limit of any use).
constexpr std::uint64_t kMaxExact = std::uint64_t{1} << 53;

std::string num(std::uint64_t v) { return std::to_string(std::min(v, kMaxExact)); }

}  // namespace

std::optional<LeaseGrant> parse_lease_reply(const RedisReply& r, const LeaseAsk& ask,
                                            Millis valid_until) {
  if (r.type != RedisReply::Type::kArray || r.elements.size() != 4) return std::nullopt;
  for (const auto& e : r.elements)
    if (e.type != RedisReply::Type::kInteger) return std::nullopt;
  const long long grant = r.elements[0].integer, used = r.elements[1].integer,
                  others = r.elements[2].integer, oldest = r.elements[3].integer;
  if (grant < 0 || used < 0 || others < 0 || oldest < -1) return std::nullopt;
  if (static_cast<std::uint64_t>(grant) > std::min(ask.want, kMaxExact)) return std::nullopt;
  LeaseGrant g;
  g.lease = static_cast<std::uint64_t>(grant);
  g.fleet_used = static_cast<std::uint64_t>(used);
  g.others = static_cast<std::uint64_t>(others);
  g.valid_until = valid_until;
  if (ask.period.calendar != Calendar::kNone) {
    g.drains_at = quota::calendar_next(ask.period.calendar, ask.now);
  } else if (oldest >= 0 && ask.bucket_width > 0 &&
             oldest < (INT64_MAX / ask.bucket_width) - ask.buckets) {
    // A bucket counted is one of the window's: its end within a window (and
    // a bucket) of now; anything else is a reply out of shape.
    g.drains_at = (oldest + ask.buckets) * ask.bucket_width;
    if (g.drains_at < ask.now || g.drains_at > ask.now + (ask.buckets + 1) * ask.bucket_width)
      return std::nullopt;
  } else {
    g.drains_at = ask.now;
  }
  return g;
}

QuotaLeases::QuotaLeases(QuotaLeaseOptions options, quota::Ledger& ledger)
    : options_(std::move(options)), ledger_(ledger) {}

std::vector<std::string> QuotaLeases::script_call(const LeaseAsk& a) const {
  const Millis lease = options_.lease.count();
  std::vector<std::string> c{"EVALSHA",
                             sha_,
                             "1",
                             options_.prefix + ":q:" + a.key,
                             options_.writer,
                             std::to_string(a.now)};
  Millis ttl = 0;
  if (a.period.calendar == Calendar::kNone) {
    c.insert(c.end(), {"s", std::to_string(a.bucket_width), std::to_string(a.buckets)});
    ttl = a.bucket_width * (a.buckets + 1) + lease;
  } else {
    const Millis start = quota::calendar_start(a.period.calendar, a.now);
    const Millis prev = quota::calendar_start(a.period.calendar, start - 1);
    c.insert(c.end(), {"c", std::to_string(start), std::to_string(prev)});
    // Through the next period: what this one spends beyond the limit is
    // carried into it.
    const Millis next = quota::calendar_next(a.period.calendar, a.now);
    ttl = quota::calendar_next(a.period.calendar, next) - a.now + lease;
  }
  c.insert(c.end(),
           {num(a.amount), num(a.want), std::to_string(a.now + lease),
            std::to_string(std::max<Millis>(ttl, 1000)), a.reset ? "1" : "0", num(a.pushed)});
  for (int i = 0; i < a.own_n; ++i) {
    c.push_back(std::to_string(a.own[static_cast<std::size_t>(i)].first));
    c.push_back(num(a.own[static_cast<std::size_t>(i)].second));
  }
  return c;
}

void QuotaLeases::set_mode(bool healthy, std::uint32_t replicas) {
  const auto now = std::chrono::steady_clock::now();
  if (healthy) {
    last_ok_ = now;
    ever_ok_ = true;
  }
  // Degraded once nothing succeeded for a lease: every lease granted
  // before has run out (the ledger stops using one at half a lease).
  const bool degraded = (ever_ok_ ? now - last_ok_ : now - first_round_) > options_.lease;
  status_.degraded = degraded;
  quota::FleetMode m = quota::FleetMode::kLeased;
  if (degraded) {
    switch (options_.fail_mode) {
      case QuotaFailMode::kOpen:
        m = quota::FleetMode::kOpen;
        break;
      case QuotaFailMode::kClosed:
        m = quota::FleetMode::kClosed;
        break;
      case QuotaFailMode::kLocal:
        m = quota::FleetMode::kLocal;
        break;
    }
  }
  ledger_.set_fleet_mode(m, replicas);
}

void QuotaLeases::round(RedisConnection& redis, std::uint32_t replicas, bool fleet_ok) {
  const auto started = std::chrono::steady_clock::now();
  if (status_.rounds != 0 && started - last_round_ < options_.interval) return;
  if (status_.rounds == 0) first_round_ = started;
  ++status_.rounds;
  const Millis now = ledger_.now();
  auto asks = ledger_.lease_asks(now, options_.idle.count());
  status_.limits = asks.size();
  last_round_ = started;
  if (asks.empty()) {
    set_mode(fleet_ok, replicas);
    return;
  }
  auto failed = [&](std::string why) {
    for (const auto& a : asks) ledger_.lease_failed(a);
    ++status_.failures;
    status_.last_error = std::move(why);
    set_mode(false, replicas);
  };
  if (!redis.ensure_connected()) return failed(redis.error());
  if (sha_.empty() || loaded_on_ != redis.connects()) {
    auto loaded = redis.pipeline({{"SCRIPT", "LOAD", kLeaseScript}});
    if (!loaded) return failed(redis.error());
    const RedisReply& r = (*loaded)[0];
    if (r.type != RedisReply::Type::kString || r.str.size() != 40)
      return failed(r.is_error() ? r.str : "SCRIPT LOAD: not a script id");
    sha_ = r.str;
    loaded_on_ = redis.connects();
  }
  std::vector<std::vector<std::string>> batch;
  batch.reserve(asks.size());
  for (const auto& a : asks) batch.push_back(script_call(a));
  auto replies = redis.pipeline(batch);
  if (!replies) return failed(redis.error());
  if (replies->size() != asks.size()) return failed("lease replies: wrong count");
  status_.scripts += asks.size();
  // This replica stops using a lease half a lease before the fleet's
  // clock (the others') forgets it.
  const Millis valid_until = now + options_.lease.count() / 2;
  bool all = true, any = false;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const RedisReply& r = (*replies)[i];
    if (r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0) sha_.clear();  // Redis restarted
    auto g = parse_lease_reply(r, asks[i], valid_until);
    if (g) {
      ledger_.lease_granted(asks[i], *g);
      any = true;
    } else {
      ledger_.lease_failed(asks[i]);
      if (all) status_.last_error = r.is_error() ? r.str : "lease reply out of shape";
      all = false;
    }
  }
  if (!all) ++status_.failures;
  // Redis answered: a limit whose reply was out of shape (its key of
  // another type: an operator's) goes without a lease, not the fleet.
  set_mode(any, replicas);
}

}  // namespace sluice::fleet
