// A replica's fleet sync thread (redis:): once per interval it hands the
// controller the other replicas' merged state and takes this replica's own
// (one exchange on the dispatcher thread, which never waits on Redis), then
// writes its own state to Redis and reads the others'.
//
// Keys (prefix P, replica id R; every R key expires after the lease unless
// refreshed, so a replica that dies leaves nothing behind):
//   P:replicas   SET of replica ids
//   P:r:R        HASH, rewritten atomically (MULTI/EXEC) every sync:
//                inc (incarnation: random per process start), seq, at (unix
//                ms), addr, svc (version of P:s:R), b:<priority> (smallest
//                VTC counter backlogged in that band), e:<endpoint address>
//                ("in-flight dispatched-since-scrape in-flight-tokens")
//   P:s:R        HASH "<priority> <fairness id>" -> cumulative priced service
//                this incarnation gave that flow (changed fields only)
// A reader turns the others' cumulative service into deltas (per replica
// and incarnation), sums their endpoint work, and takes the smallest
// backlogged counter per band (fleet_view_merge.h, apart from Redis so the
// simulator runs it too). Another replica counts while its record
// advances: one whose seq has not moved for a lease (the reader's lease, on
// its own steady clock) is gone even if its hash never expires (written
// without one by an operator or a bug); no other host's clock is compared.
// Redis unreachable, slow or restarted: the sync fails within its timeout,
// and once nothing was read for a lease the controller gets an empty view
// (local accounting) until Redis is back; a reconnect rewrites this
// replica's whole service table.
// Two processes with one replica id overwrite each other's P:r:R and each
// sees only itself (both take the whole pool): each reads its own hash back
// before writing it, and another incarnation there after this one wrote
// means another live writer (a dead predecessor writes nothing after us).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fleet/fleet_view_merge.h"
#include "fleet/quota_leases.h"
#include "fleet/redis_connection.h"
#include "flowcontrol/fleet_view.h"

namespace sluice::fleet {

struct FleetOptions {
  RedisAddress redis;
  std::string prefix = "sluice";
  std::string replica_id;  // required
  std::string advertise;   // shown to operators (the admin address)
  std::chrono::milliseconds interval{25};
  std::chrono::milliseconds lease{2000};
  std::uint32_t max_replicas = 64;
  // This replica's service table: at most this many flows (the least
  // recently served go first), each dropped after `service_idle` unserved.
  std::size_t max_flows = 10000;
  std::chrono::milliseconds service_idle{std::chrono::minutes(10)};
};

// An operator change made through one replica's admin API, applied by every
// other (fleet-wide flow overrides, band changes, a fleet drain). Stored in
// P:ops (HASH: admin path -> "<seq> <origin> <method> <target>\n<body>",
// the last change of each path, seq from INCR P:opsver, written by one Lua
// script so a reader never sees the version without the change).
struct FleetOperation {
  std::string method;
  std::string target;  // path and query, as sent to the admin API
  std::string body;
};

struct ReplicaStatus {
  std::string id;
  std::string address;
  bool self = false;
  std::int64_t last_sync_unix_ms = 0;  // as the replica wrote it
  std::int64_t lag_ms = 0;             // now - last_sync (clocks of two hosts)
  std::uint64_t seq = 0;
};

// A change made through another replica that this one refused: its admin
// answer (status, typed code, message) and when (unix ms, this host's).
struct RefusedOperation {
  std::string method;
  std::string target;
  int status = 0;
  std::string code;
  std::string message;
  std::int64_t at_unix_ms = 0;
};
inline constexpr std::size_t kRefusedOperationsKept = 16;

struct FleetStatus {
  std::string replica_id;
  bool connected = false;
  bool degraded = true;  // nothing read from Redis for a lease: local accounting
  std::uint64_t syncs = 0;
  std::uint64_t failures = 0;
  std::uint64_t reconnects = 0;
  std::string last_error;
  std::int64_t last_ok_unix_ms = 0;
  double last_sync_seconds = 0;  // the last round's wall time
  std::uint64_t holds = 0;       // the controller's fleet holds so far
  std::uint64_t hold_overrides = 0;
  std::uint64_t commands = 0;  // sent to Redis so far
  std::uint64_t operations_published = 0;
  std::uint64_t operations_applied = 0;  // from other replicas
  // Of those, refused here (a record another replica took and this one
  // does not): every replica must hold the same changes, so an operator
  // sees them here and on /metrics, not only in a log line.
  std::uint64_t operations_refused = 0;
  std::vector<RefusedOperation> refused;  // the last kRefusedOperationsKept, oldest first
  // Another process wrote under this replica's id within the last lease
  // (the same redis.replicaId given to two replicas).
  bool duplicate_id = false;
  std::uint64_t duplicate_id_syncs = 0;  // syncs that found its state under this id
  std::vector<ReplicaStatus> replicas;
  bool quotas = false;  // quota leases synced here (set_quota_ledger)
  QuotaLeaseStatus quota;
};

class FleetSync {
 public:
  // Runs on the sync thread: must apply `in` and fill `out` on the
  // dispatcher, and return false if it could not (stopped, or slower than
  // its bound): then nothing of `out` is published this round.
  using Exchange =
      std::function<bool(const flowcontrol::FleetInbound& in, flowcontrol::FleetOutbound& out)>;
  using Logger = std::function<void(bool warning, const std::string& message)>;

  FleetSync(FleetOptions options, Exchange exchange, Logger logger = {});
  ~FleetSync();
  FleetSync(const FleetSync&) = delete;
  FleetSync& operator=(const FleetSync&) = delete;

  void start();
  // Stops the thread and removes this replica from the fleet (best effort,
  // one timeout at most): the others stop counting its work at once.
  void stop();
  // One round now, on the calling thread (tests; not with start()).
  void sync_once();

  FleetStatus status() const;

  // Any thread: stores `op` for the others at the next sync (kept until a
  // sync succeeds; at most 1000 waiting, the oldest dropped past that).
  void publish_operation(FleetOperation op);
  // Called on the sync thread for each change another replica made (in the
  // order they were made; at start, every stored change, its own from a
  // previous run included). Set once, before or after start().
  void set_operation_handler(std::function<void(const FleetOperation&)> handler);
  // Quotas' leases (issue 41): each round also leases the busy limits of
  // `ledger` (quota_leases.h). Before start().
  void set_quota_ledger(quota::Ledger& ledger, QuotaLeaseOptions options);

  // Any thread: the handler's answer to another replica's change was a
  // refusal (counted, and kept among the last few shown by status()).
  void note_operation_refused(RefusedOperation refused);

 private:
  struct Remote {
    std::string incarnation;
    std::string svc_version;                           // of the service table last read
    std::chrono::steady_clock::time_point present{};   // last seen in Redis
    std::uint64_t seq = 0;                             // as last read
    std::chrono::steady_clock::time_point advanced{};  // when seq was last seen to move
    // Its seq moved since the last view handed over as advanced
    // (FleetInbound::advanced).
    bool moved = true;
  };
  struct Own {
    double value = 0;
    std::chrono::steady_clock::time_point changed{};
    bool dirty = true;
  };
  // One round's state, handed from step to step (fleet_sync.cc).
  struct Round;
  void run();
  // One sync: the exchange with the dispatcher, this replica's state
  // written, the others' read and merged for the next exchange. Its steps,
  // in order; one that returns false ends the round (failed, or nothing to
  // publish).
  void round();
  bool hand_over(Round& r);
  void record_own_service(const Round& r);
  void prune_own_service(std::chrono::steady_clock::time_point started);
  bool connect();
  void plan_batch(Round& r);
  bool send_batch(Round& r);
  void settle_write(const Round& r);
  void settle_operations_out(Round& r);
  bool read_states(Round& r);
  void parse_states(Round& r);
  bool read_service_tables(Round& r);
  bool apply_others_operations(Round& r);
  void forget_absent(const Round& r);
  void merge_view(Round& r);
  void drop_gone(Round& r);
  void record_sync(const Round& r);
  void quota_round();
  // What the steps share.
  std::vector<std::string> state_record(const flowcontrol::FleetOutbound& out) const;
  std::optional<std::vector<RedisReply>> send(Round& r,
                                              const std::vector<std::vector<std::string>>& batch);
  bool advancing(Remote& remote, const std::string& inc, std::uint64_t seq,
                 std::chrono::steady_clock::time_point started);
  void fail(const std::string& message);
  // After this replica's write: `other` is the incarnation its own hash held
  // just before it (empty: none, or this one's, or not known to be live).
  void note_duplicate(const std::string& other, std::chrono::steady_clock::time_point now);

  FleetOptions options_;
  Exchange exchange_;
  Logger logger_;
  RedisConnection redis_;
  std::string incarnation_;
  std::uint64_t seq_ = 0;
  std::uint64_t svc_version_ = 0;
  std::uint64_t connects_seen_ = 0;
  std::chrono::steady_clock::time_point last_read_{};
  bool ever_read_ = false;
  std::chrono::steady_clock::time_point first_round_{};
  bool rounds_started_ = false;
  bool wrote_ = false;  // this incarnation's state written on this connection
  bool duplicate_ = false;
  std::chrono::steady_clock::time_point duplicate_seen_{};
  std::chrono::steady_clock::time_point duplicate_logged_{};
  flowcontrol::FleetInbound inbound_;
  std::unique_ptr<QuotaLeases> quotas_;
  std::unordered_map<std::string, Own> own_;
  std::vector<std::string> pruned_;
  std::vector<std::string> members_;  // others, as of the last read
  std::map<std::string, Remote> remotes_;
  ServiceLedger ledger_;  // the service tables of those in remotes_, as last read

  std::string origin_;  // replica id and incarnation: whose operations are whose
  std::mutex ops_mu_;
  std::vector<FleetOperation> ops_out_;  // waiting for a sync
  std::function<void(const FleetOperation&)> ops_handler_;
  std::string ops_version_;                                     // P:opsver as last read
  std::unordered_map<std::string, std::uint64_t> ops_applied_;  // path -> seq applied

  mutable std::mutex status_mu_;
  FleetStatus status_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::fleet
