// Quotas across a fleet (issue 41, item 3): the sync thread's lease round.
// For each busy limit of this replica's ledger, one Lua script in Redis
// (pipelined: one round trip for all of them) that
//   1. writes this replica's own spend by bucket (absolute values, keyed by
//      replica and incarnation: a rewrite after a Redis restart restores
//      the spend, and a restarted replica never overwrites its
//      predecessor's),
//   2. sums every replica's spend in the window (a calendar period: the
//      period's, plus what the previous one spent beyond the limit) and
//      the other replicas' leases not yet expired, dropping what left,
//   3. grants this replica min(want, limit - spend - others' leases),
//      valid for redis.lease, and returns the four numbers.
// So the outstanding leases never exceed what the window has left: the
// fleet overshoots a limit only by what reservations understate (a
// request that used more than its worst case) and by what a replica
// spends on a lease it has lost track of (none while its clock is within
// half a lease of the others': it stops using a lease half a lease
// before the fleet forgets it).
//
// Keys: P:q:<owner>:<limit>:<period>  HASH
//   b:<bucket>:<replica>/<incarnation>  that writer's spend in the bucket
//                                       (a calendar period: its start, ms)
//   l:<replica>/<incarnation>           "<lease> <expiry unix ms>"
// expiring a window (a calendar limit: to the next period's end) and a
// lease after its last sync.
//
// Redis unreachable or refusing for a lease: the ledger's failMode (open,
// closed, local); each round still tries, and the first that succeeds
// writes this replica's spend again and leases anew.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fleet/redis_connection.h"
#include "quota/ledger.h"

namespace sluice::fleet {

enum class QuotaFailMode : std::uint8_t { kOpen, kClosed, kLocal };

struct QuotaLeaseOptions {
  std::string prefix = "sluice";
  std::string writer;  // "<replica id>/<incarnation>"
  std::chrono::milliseconds lease{2000};
  // A lease round at most this often (each busy limit one script).
  std::chrono::milliseconds interval{100};
  // A limit neither reserved nor settled for this long gives its lease
  // back and is synced no more until it is used again.
  std::chrono::milliseconds idle{std::chrono::seconds(10)};
  QuotaFailMode fail_mode = QuotaFailMode::kLocal;
};

struct QuotaLeaseStatus {
  std::uint64_t rounds = 0;
  std::uint64_t failures = 0;  // rounds that failed (Redis, or a reply out of shape)
  std::uint64_t scripts = 0;   // limit scripts run
  std::uint64_t limits = 0;    // busy limits, at the last round
  bool degraded = false;       // the fail mode applies
  std::string last_error;
};

// One limit's answer, checked (pure: fuzzed and unit-tested). nullopt: the
// reply is not four integers in range (grant <= want).
std::optional<quota::LeaseGrant> parse_lease_reply(const RedisReply& r, const quota::LeaseAsk& ask,
                                                   quota::Millis valid_until);

class QuotaLeases {
 public:
  QuotaLeases(QuotaLeaseOptions options, quota::Ledger& ledger);

  // One round, on the sync thread, if `interval` has passed: every busy
  // limit's script in one pipeline on `redis`; `replicas`: those the fleet
  // saw at its last read (kLocal's divisor); `fleet_ok`: the fleet's own
  // round read Redis within a lease (what says Redis is there when no
  // limit is busy). Sets the ledger's mode.
  void round(RedisConnection& redis, std::uint32_t replicas, bool fleet_ok);
  QuotaLeaseStatus status() const { return status_; }

 private:
  std::vector<std::string> script_call(const quota::LeaseAsk& ask) const;
  void set_mode(bool healthy, std::uint32_t replicas);

  QuotaLeaseOptions options_;
  quota::Ledger& ledger_;
  std::chrono::steady_clock::time_point first_round_{};
  std::chrono::steady_clock::time_point last_round_{};
  std::chrono::steady_clock::time_point last_ok_{};
  bool ever_ok_ = false;
  std::uint64_t loaded_on_ = 0;  // the connection (connects()) the script was loaded on
  std::string sha_;
  QuotaLeaseStatus status_;
};

}  // namespace sluice::fleet
