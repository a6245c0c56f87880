#include "fleet/fleet_sync.h"

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

namespace sluice::fleet {

using flowcontrol::FleetBandBacklog;
using flowcontrol::FleetEndpointLoad;
using flowcontrol::FleetInbound;
using flowcontrol::FleetOutbound;
using Steady = std::chrono::steady_clock;

namespace {

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <class T>
bool parse_number(std::string_view s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_service(std::string_view s, double& out) {
  return parse_number(s, out) && std::isfinite(out) && out >= 0 && out < 1e300;
}

// "A B C": three unsigned decimal numbers (no sign: sscanf's %llu would
// take "-1" as 2^64-1), nothing else.
bool parse_counts(std::string_view v, std::uint64_t& a, std::uint64_t& b, std::uint64_t& c) {
  const auto s1 = v.find(' ');
  if (s1 == std::string_view::npos) return false;
  const auto s2 = v.find(' ', s1 + 1);
  if (s2 == std::string_view::npos) return false;
  return parse_number(v.substr(0, s1), a) && parse_number(v.substr(s1 + 1, s2 - s1 - 1), b) &&
         parse_number(v.substr(s2 + 1), c);
}

std::string format_double(double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

// A hash reply (HGETALL) as field/value pairs; at most `cap` pairs read.
template <class Visit>
void for_each_field(const RedisReply& r, std::size_t cap, Visit&& visit) {
  if (r.type != RedisReply::Type::kArray) return;
  const std::size_t n = std::min(r.elements.size() / 2, cap);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& f = r.elements[2 * i];
    const auto& v = r.elements[2 * i + 1];
    if (f.type != RedisReply::Type::kString || v.type != RedisReply::Type::kString) continue;
    visit(f.str, v.str);
  }
}

// Bounds on what is taken from another replica's hashes: Redis is the
// operator's, but a field never grows a table past these.
constexpr std::size_t kMaxEndpointsPerReplica = 4096;
constexpr std::size_t kMaxBandsPerReplica = 1024;
constexpr std::size_t kMaxFieldBytes = 512;

// A duplicate replica id is repeated in the log this often while it lasts:
// loud enough to be found, not a line per sync.
constexpr auto kDuplicateWarnEvery = std::chrono::seconds(10);

}  // namespace

FleetSync::FleetSync(FleetOptions options, Exchange exchange, Logger logger)
    : options_(std::move(options)),
      exchange_(std::move(exchange)),
      logger_(std::move(logger)),
      redis_(options_.redis) {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<std::uint64_t>(unix_ms()));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  incarnation_ = buf;
  origin_ = options_.replica_id + "/" + incarnation_;
  status_.replica_id = options_.replica_id;
}

void FleetSync::publish_operation(FleetOperation op) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  if (ops_out_.size() >= 1000) ops_out_.erase(ops_out_.begin());
  ops_out_.push_back(std::move(op));
}

void FleetSync::set_operation_handler(std::function<void(const FleetOperation&)> handler) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  ops_handler_ = std::move(handler);
}

void FleetSync::note_operation_refused(RefusedOperation refused) {
  std::lock_guard<std::mutex> lock(status_mu_);
  status_.operations_refused += 1;
  if (status_.refused.size() >= kRefusedOperationsKept)
    status_.refused.erase(status_.refused.begin());
  status_.refused.push_back(std::move(refused));
}

FleetSync::~FleetSync() { stop(); }

void FleetSync::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-fleet");
    run();
  });
}

void FleetSync::stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Leave the fleet: the others stop counting this replica's work now, not
  // after its lease.
  if (redis_.connected() || ever_read_) {
    const std::string p = options_.prefix;
    redis_.pipeline({{"DEL", p + ":r:" + options_.replica_id},
                     {"DEL", p + ":s:" + options_.replica_id},
                     {"SREM", p + ":replicas", options_.replica_id}});
  }
}

void FleetSync::set_quota_ledger(quota::Ledger& ledger, QuotaLeaseOptions options) {
  options.prefix = options_.prefix;
  options.writer = origin_;
  options.lease = options_.lease;
  quotas_ = std::make_unique<QuotaLeases>(std::move(options), ledger);
  std::lock_guard<std::mutex> lock(status_mu_);
  status_.quotas = true;
}

// The quota leases' round, after the fleet's (quota_leases.h): the
// replicas the fleet saw, and whether it read Redis within a lease.
void FleetSync::quota_round() {
  if (!quotas_) return;
  std::uint32_t replicas;
  bool ok;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    replicas = static_cast<std::uint32_t>(std::max<std::size_t>(1, status_.replicas.size()));
    ok = !status_.degraded;
  }
  const bool was = quotas_->status().degraded;
  quotas_->round(redis_, replicas, ok);
  const QuotaLeaseStatus q = quotas_->status();
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    status_.quota = q;
  }
  if (logger_ && was != q.degraded)
    logger_(q.degraded, q.degraded ? "fleet: quota leases failed for a lease (" + q.last_error +
                                         "): quotas hold per replica by quota.failMode until "
                                         "Redis is back"
                                   : "fleet: quota leases are back: quotas hold fleet-wide");
}

void FleetSync::run() {
  auto next = Steady::now();
  while (true) {
    round();
    quota_round();
    next += options_.interval;
    const auto now = Steady::now();
    if (next < now) next = now;  // a slow round: no burst to catch up
    std::unique_lock<std::mutex> lock(stop_mu_);
    if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
  }
}

void FleetSync::sync_once() {
  round();
  quota_round();
}

FleetStatus FleetSync::status() const {
  std::lock_guard<std::mutex> lock(status_mu_);
  return status_;
}

void FleetSync::fail(const std::string& message) {
  bool was_connected;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    was_connected = status_.connected || status_.failures == 0;
    status_.connected = false;
    status_.failures += 1;
    status_.last_error = message;
    status_.degraded = !ever_read_ || Steady::now() - last_read_ > options_.lease;
  }
  if (was_connected && logger_)
    logger_(true, "fleet sync with Redis failed (" + message +
                      "): accounting stays local until it is back");
}

void FleetSync::note_duplicate(const std::string& other, Steady::time_point now) {
  const bool found = !other.empty();
  if (found) duplicate_seen_ = now;
  const bool was = duplicate_;
  // Flagged for a lease after the last sighting: the other process may sync
  // out of phase with this one and not be seen at every round.
  duplicate_ = found || (was && now - duplicate_seen_ <= options_.lease);
  std::uint64_t syncs;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    if (found) status_.duplicate_id_syncs += 1;
    status_.duplicate_id = duplicate_;
    syncs = status_.duplicate_id_syncs;
  }
  if (!logger_) return;
  if (found && (!was || now - duplicate_logged_ >= kDuplicateWarnEvery)) {
    duplicate_logged_ = now;
    logger_(true, "fleet: another process is syncing under this replica's id '" +
                      options_.replica_id + "' (its incarnation " + other + ", this one's " +
                      incarnation_ + "; " + std::to_string(syncs) +
                      " sync(s) so far): each overwrites the other's state and neither counts "
                      "the other's work, so the fleet's limits are exceeded. Give each process "
                      "its own redis.replicaId (leave it unset in a Deployment: hostname-pid)");
  } else if (was && !duplicate_) {
    logger_(false, "fleet: no other process has written under replica id '" + options_.replica_id +
                       "' for a lease");
  }
}

namespace {

// Another replica's record (P:r:R) as read this round.
struct ReplicaRecord {
  std::string inc, svc, addr;
  std::int64_t at = 0;
  std::uint64_t seq = 0;
  ReplicaReport report;
};

// Parses another replica's P:r:R hash, each field and table bounded (no
// incarnation: its key expired, or it left).
ReplicaRecord parse_record(const std::string& id, const RedisReply& r) {
  ReplicaRecord s;
  s.report.id = id;
  for_each_field(
      r, kMaxEndpointsPerReplica + kMaxBandsPerReplica + 8,
      [&](const std::string& f, const std::string& v) {
        if (f.size() > kMaxFieldBytes || v.size() > kMaxFieldBytes) return;
        if (f == "inc") {
          s.inc = v;
        } else if (f == "svc") {
          s.svc = v;
        } else if (f == "addr") {
          s.addr = v;
        } else if (f == "at") {
          parse_number(v, s.at);
        } else if (f == "seq") {
          parse_number(v, s.seq);
        } else if (f == "q") {
          parse_number(v, s.report.queued);
          s.report.queued = std::min<std::uint64_t>(s.report.queued, std::uint64_t{1} << 32);
        } else if (f.rfind("b:", 0) == 0 && s.report.backlog.size() < kMaxBandsPerReplica) {
          FleetBandBacklog b;
          const auto space = v.find(' ');
          const std::string_view sv(v);
          if (space != std::string::npos &&
              parse_number(std::string_view(f).substr(2), b.priority) &&
              parse_number(sv.substr(0, space), b.queued)) {
            b.queued = std::min<std::uint64_t>(b.queued, std::uint64_t{1} << 32);
            b.has_counter = parse_service(sv.substr(space + 1), b.min_counter);
            s.report.backlog.push_back(b);
          }
        } else if (f.rfind("e:", 0) == 0 && s.report.endpoints.size() < kMaxEndpointsPerReplica) {
          FleetEndpointLoad e;
          e.address = f.substr(2);
          std::uint64_t a = 0, b = 0, c = 0;
          if (parse_counts(v, a, b, c)) {
            e.in_flight = static_cast<std::uint32_t>(std::min<std::uint64_t>(a, 1u << 24));
            e.dispatched_since_scrape =
                static_cast<std::uint32_t>(std::min<std::uint64_t>(b, 1u << 24));
            e.in_flight_tokens = std::min<std::uint64_t>(c, std::uint64_t{1} << 40);
            s.report.endpoints.push_back(std::move(e));
          }
        }
      });
  return s;
}

// An operator change stored in P:ops, with its sequence number.
struct StoredOperation {
  std::uint64_t seq;
  std::string key;
  FleetOperation op;
};

// The changes in P:ops (HGETALL reply `r`) not applied yet (`applied`: path
// -> seq, updated) and made elsewhere than `origin`, in the order they were
// made.
std::vector<StoredOperation> fresh_operations(
    const RedisReply& r, std::unordered_map<std::string, std::uint64_t>& applied,
    const std::string& origin_here) {
  std::vector<StoredOperation> fresh;
  for_each_field(r, 10000, [&](const std::string& key, const std::string& v) {
    // "<seq> <origin> <method> <target>\n<body>"
    const auto nl = v.find('\n');
    const std::string head = v.substr(0, nl);
    char origin[300] = {}, method[16] = {}, target[2048] = {};
    unsigned long long seq = 0;
    if (nl == std::string::npos || head.size() > 2300 || head.empty() ||
        !std::isdigit(static_cast<unsigned char>(head[0])) ||
        std::sscanf(head.c_str(), "%llu %299s %15s %2047s", &seq, origin, method, target) != 4)
      return;
    auto& done = applied[key];
    if (seq <= done) return;
    done = seq;
    if (origin_here == origin) return;  // made here
    fresh.push_back(StoredOperation{seq, key, FleetOperation{method, target, v.substr(nl + 1)}});
  });
  std::sort(fresh.begin(), fresh.end(),
            [](const StoredOperation& a, const StoredOperation& b) { return a.seq < b.seq; });
  return fresh;
}

}  // namespace

// One round's state, from the exchange with the dispatcher to the status:
// what round()'s steps hand each other.
struct FleetSync::Round {
  Steady::time_point started;
  bool degraded = false;   // when it started: nothing read for a lease
  FleetOutbound out;       // this replica's state, from the dispatcher
  std::uint64_t sent = 0;  // calls to Redis
  // The batch that writes this replica's state and reads the others', and
  // where its parts' replies are.
  std::vector<std::vector<std::string>> cmds;
  std::size_t self_at = 0;          // HGET of the incarnation this id holds
  std::size_t multi_at = 0;         // MULTI
  std::size_t opsver_at = 0;        // GET P:opsver (the stored changes just before)
  std::size_t members_at = 0;       // SMEMBERS (the HGETALLs of `asked` just after)
  std::vector<FleetOperation> ops;  // this replica's operator changes, stored
  std::vector<std::string> asked;   // the others whose state the batch reads
  std::vector<RedisReply> replies;
  std::uint64_t published = 0;  // of `ops`, stored
  std::string ops_version;      // P:opsver as read
  // The others: in id order, at most max_replicas; their P:r hashes; the
  // live ones parsed; those gone; those whose service table changed.
  std::vector<std::string> members;
  std::map<std::string, RedisReply> states;
  std::map<std::string, ReplicaRecord> parsed;
  std::vector<std::string> gone;
  std::vector<std::string> read_service;
  ServiceDeltas deltas;       // their service since what was last seen
  std::uint64_t applied = 0;  // operator changes of the others, applied
};

void FleetSync::round() {
  Round r;
  r.started = Steady::now();
  // 1. The exchange with the dispatcher: the last merged view in (or none
  // once nothing was read for a lease), this replica's state out.
  if (!hand_over(r)) return;
  record_own_service(r);
  prune_own_service(r.started);
  if (!connect()) return;
  // 2. Write this replica's state (atomically), read the member list and
  // the state of each other replica known from the last round.
  plan_batch(r);
  if (!send_batch(r)) return;
  settle_write(r);
  settle_operations_out(r);
  // 3. The members: others, in id order, at most max_replicas; each one's
  // state parsed; note whose service table to read.
  if (!read_states(r)) return;
  parse_states(r);
  // 4. The service tables that changed: deltas since what was seen; the
  // operator changes made through other replicas since the last read.
  if (!read_service_tables(r)) return;
  if (!apply_others_operations(r)) return;
  // 5. The merged view for the next exchange.
  forget_absent(r);
  merge_view(r);
  drop_gone(r);
  record_sync(r);
}

// Hands the dispatcher the last merged view (none once nothing was read for
// a lease) and takes this replica's state into r.out: false if it could not.
bool FleetSync::hand_over(Round& r) {
  if (!rounds_started_) {
    rounds_started_ = true;
    first_round_ = r.started;
  }
  r.degraded = !ever_read_ || r.started - last_read_ > options_.lease;
  FleetInbound local_only;
  // Before the first read, the dispatcher waits (at most a lease).
  local_only.ready = ever_read_ || r.started - first_round_ > options_.lease;
  if (!exchange_(r.degraded ? local_only : inbound_, r.out)) return false;
  inbound_.service.clear();   // charged once
  inbound_.advanced = false;  // handed over: the same view again is no news
  return true;
}

// Adds the service this replica gave to its own table (to be written).
void FleetSync::record_own_service(const Round& r) {
  for (auto& [key, service] : r.out.service) {
    Own& o = own_[key];
    o.value += service;
    o.changed = r.started;
    o.dirty = true;
  }
}

// Bounded: drop flows not served for service_idle, then the least
// recently served past max_flows.
void FleetSync::prune_own_service(Steady::time_point started) {
  if (own_.size() > options_.max_flows || seq_ % 64 == 0) {
    std::vector<std::pair<Steady::time_point, std::string>> by_age;
    for (auto it = own_.begin(); it != own_.end();) {
      if (started - it->second.changed > options_.service_idle) {
        pruned_.push_back(it->first);
        it = own_.erase(it);
      } else {
        if (own_.size() > options_.max_flows) by_age.emplace_back(it->second.changed, it->first);
        ++it;
      }
    }
    if (own_.size() > options_.max_flows) {
      std::sort(by_age.begin(), by_age.end());
      for (std::size_t i = 0; i < by_age.size() && own_.size() > options_.max_flows; ++i) {
        own_.erase(by_age[i].second);
        pruned_.push_back(by_age[i].second);
      }
    }
  }
}

// Connects to Redis if not connected (false: it failed, and the round with
// it); on a new connection everything is written again.
bool FleetSync::connect() {
  if (!redis_.ensure_connected()) {
    fail(redis_.error());
    return false;
  }
  if (redis_.connects() != connects_seen_) {
    // A new connection (first, or after Redis restarted): write everything.
    connects_seen_ = redis_.connects();
    for (auto& [k, o] : own_) o.dirty = true;
    // What a new connection (after a failover, say) shows under this id
    // first may predate this replica's writes: known again after one write.
    wrote_ = false;
    if (connects_seen_ > 1) {
      std::lock_guard<std::mutex> lock(status_mu_);
      status_.reconnects += 1;
    }
  }
  return true;
}

// This replica's record (P:r:R): incarnation, seq, time, address, service
// table version, queued, and per band and endpoint its backlog and work.
std::vector<std::string> FleetSync::state_record(const FleetOutbound& out) const {
  const std::string& p = options_.prefix;
  const std::string& me = options_.replica_id;
  std::vector<std::string> state{"HSET", p + ":r:" + me,
                                 "inc",  incarnation_,
                                 "seq",  std::to_string(seq_),
                                 "at",   std::to_string(unix_ms()),
                                 "addr", options_.advertise,
                                 "svc",  std::to_string(svc_version_),
                                 "q",    std::to_string(out.queued)};
  for (const auto& b : out.backlog) {
    // "<queued> <smallest counter>" ("-": the band's policy has none).
    state.push_back("b:" + std::to_string(b.priority));
    state.push_back(std::to_string(b.queued) + " " +
                    (b.has_counter ? format_double(b.min_counter) : std::string("-")));
  }
  for (const auto& e : out.endpoints) {
    state.push_back("e:" + e.address);
    state.push_back(std::to_string(e.in_flight) + " " + std::to_string(e.dispatched_since_scrape) +
                    " " + std::to_string(e.in_flight_tokens));
  }
  return state;
}

// The round's batch (r.cmds): read back whose state this id holds, write
// this replica's state and changed service in one transaction, store its
// operator changes, then read the stored changes' version, the member list
// and the state of each other replica known from the last round.
void FleetSync::plan_batch(Round& r) {
  const std::string& p = options_.prefix;
  const std::string& me = options_.replica_id;
  ++seq_;
  auto& cmds = r.cmds;
  std::vector<std::string> hset{"HSET", p + ":s:" + me};
  for (auto& [k, o] : own_)
    if (o.dirty) {
      hset.push_back(k);
      hset.push_back(format_double(o.value));
    }
  const bool svc_changed = hset.size() > 2 || !pruned_.empty();
  if (svc_changed) ++svc_version_;
  std::vector<std::string> state = state_record(r.out);
  const std::string lease = std::to_string(options_.lease.count());
  // Whose state this id holds just before this write: another incarnation
  // than this one, after this one wrote, is another live process.
  r.self_at = cmds.size();
  cmds.push_back({"HGET", p + ":r:" + me, "inc"});
  r.multi_at = cmds.size();
  cmds.push_back({"MULTI"});
  cmds.push_back({"DEL", p + ":r:" + me});
  cmds.push_back(std::move(state));
  cmds.push_back({"PEXPIRE", p + ":r:" + me, lease});
  if (hset.size() > 2) cmds.push_back(std::move(hset));
  if (!pruned_.empty()) {
    std::vector<std::string> hdel{"HDEL", p + ":s:" + me};
    hdel.insert(hdel.end(), pruned_.begin(), pruned_.end());
    cmds.push_back(std::move(hdel));
  }
  cmds.push_back({"PEXPIRE", p + ":s:" + me, lease});
  cmds.push_back({"SADD", p + ":replicas", me});
  cmds.push_back({"EXEC"});
  // Operator changes made here, each stored with its sequence number.
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    r.ops = ops_out_;
  }
  static const char* kStoreOp =
      "local n = redis.call('INCR', KEYS[2]) "
      "redis.call('HSET', KEYS[1], ARGV[1], n .. ' ' .. ARGV[2]) return n";
  for (const auto& op : r.ops)
    cmds.push_back({"EVAL", kStoreOp, "2", p + ":ops", p + ":opsver",
                    op.target.substr(0, op.target.find('?')),
                    origin_ + " " + op.method + " " + op.target + "\n" + op.body});
  r.opsver_at = cmds.size();
  cmds.push_back({"GET", p + ":opsver"});
  r.members_at = cmds.size();
  cmds.push_back({"SMEMBERS", p + ":replicas"});
  r.asked = members_;
  for (const auto& id : r.asked) cmds.push_back({"HGETALL", p + ":r:" + id});
}

// Every call of the round: counted, and a failure ends the round.
std::optional<std::vector<RedisReply>> FleetSync::send(
    Round& r, const std::vector<std::vector<std::string>>& batch) {
  r.sent += batch.size();
  auto replies = redis_.pipeline(batch);
  if (!replies) fail(redis_.error());
  return replies;
}

// Sends the round's batch into r.replies: false if it failed or its
// transaction was refused.
bool FleetSync::send_batch(Round& r) {
  auto replies = send(r, r.cmds);
  if (!replies) return false;
  r.replies = std::move(*replies);
  const RedisReply& exec = r.replies[r.opsver_at - 1 - r.ops.size()];
  if (exec.type != RedisReply::Type::kArray) {
    // The transaction was refused (a write to a replica, OOM, ACL): the
    // reason is in the reply of the command that failed or in EXEC's.
    std::string why = exec.is_error() ? exec.str : "transaction aborted";
    for (std::size_t i = r.multi_at; i + 1 < r.opsver_at - r.ops.size(); ++i)
      if (r.replies[i].is_error()) why = r.replies[i].str;
    fail(why);
    return false;
  }
  for (const auto& e : exec.elements)
    if (e.is_error()) {
      fail(e.str);
      return false;
    }
  return true;
}

// After the write: this replica's service is written; whose incarnation
// the id held just before it tells whether another process uses the id.
void FleetSync::settle_write(const Round& r) {
  for (auto& [k, o] : own_) o.dirty = false;
  pruned_.clear();
  const RedisReply& held = r.replies[r.self_at];
  std::string other;
  if (wrote_ && held.type == RedisReply::Type::kString && held.str != incarnation_) {
    // Into a log line: Redis's bytes, bounded and printable.
    for (char ch : held.str.substr(0, 64)) other += ch > ' ' && ch < 0x7f ? ch : '?';
    if (other.empty()) other = "?";
  }
  note_duplicate(other, r.started);
  wrote_ = true;
}

// The operator changes the batch stored: counted, a refused one logged,
// none sent again; and the stored changes' version as read.
void FleetSync::settle_operations_out(Round& r) {
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const RedisReply& reply = r.replies[r.opsver_at - r.ops.size() + i];
    if (reply.is_error()) {
      // Refused (e.g. an ACL without +@scripting): said once per change.
      if (logger_) logger_(true, "fleet: storing an operator change failed: " + reply.str);
    } else {
      ++r.published;
    }
  }
  {
    // Sent: not sent again (a refused one would be refused again).
    std::lock_guard<std::mutex> lock(ops_mu_);
    ops_out_.erase(ops_out_.begin(), ops_out_.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                            r.ops.size(), ops_out_.size())));
  }
  const RedisReply& opsver = r.replies[r.opsver_at];
  r.ops_version = opsver.type == RedisReply::Type::kString ? opsver.str : "";
}

// The members (others, in id order, at most max_replicas) into r.members,
// and each one's P:r hash into r.states: from the batch if it was asked
// for, else read now (false: that read failed).
bool FleetSync::read_states(Round& r) {
  const std::string& me = options_.replica_id;
  const RedisReply& set = r.replies[r.members_at];
  if (set.type == RedisReply::Type::kArray)
    for (const auto& m : set.elements)
      if (m.type == RedisReply::Type::kString && m.str != me && m.str.size() <= kMaxFieldBytes)
        r.members.push_back(m.str);
  std::sort(r.members.begin(), r.members.end());
  if (r.members.size() > options_.max_replicas) r.members.resize(options_.max_replicas);

  for (std::size_t i = 0; i < r.asked.size(); ++i)
    r.states[r.asked[i]] = r.replies[r.members_at + 1 + i];
  std::vector<std::string> unseen;  // members whose state was not asked for yet
  for (const auto& id : r.members)
    if (!r.states.count(id)) unseen.push_back(id);
  if (!unseen.empty()) {
    std::vector<std::vector<std::string>> more;
    for (const auto& id : unseen) more.push_back({"HGETALL", options_.prefix + ":r:" + id});
    auto replies = send(r, more);
    if (!replies) return false;
    for (std::size_t i = 0; i < unseen.size(); ++i) r.states[unseen[i]] = std::move((*replies)[i]);
  }
  return true;
}

// Each member's state parsed into r.parsed if it is live (else into
// r.gone); r.read_service: those whose service table changed.
void FleetSync::parse_states(Round& r) {
  for (const auto& id : r.members) {
    ReplicaRecord s = parse_record(id, r.states[id]);
    if (s.inc.empty()) {
      r.gone.push_back(id);  // its key expired (or it left)
      continue;
    }
    Remote& remote = remotes_[id];
    if (!advancing(remote, s.inc, s.seq, r.started)) {
      r.gone.push_back(id);
      continue;
    }
    remote.present = r.started;
    if (remote.svc_version != s.svc) r.read_service.push_back(id);
    r.parsed[id] = std::move(s);
  }
}

// Follows another replica's record (incarnation `inc`, `seq`): false once
// its seq has not moved for a lease.
bool FleetSync::advancing(Remote& remote, const std::string& inc, std::uint64_t seq,
                          Steady::time_point started) {
  if (remote.incarnation != inc) {
    // New, or restarted (its service table too: ledger_ starts it over).
    remote = Remote{};
    remote.incarnation = inc;
    remote.seq = seq;
    remote.advanced = started;
  } else if (remote.seq != seq) {
    remote.seq = seq;
    remote.advanced = started;
    remote.moved = true;
  }
  // The key's expiry is not the liveness rule: a hash written without one
  // would hold the pool for ever. A live replica rewrites its seq every
  // interval; this clock starts when the move was seen (never before the
  // write), so it drops no replica Redis would not have expired, and
  // compares no other host's clock. A new record gets a lease of benefit.
  return started - remote.advanced <= options_.lease;
}

// The service tables that changed (r.read_service), read into deltas since
// what was seen (false: the read failed).
bool FleetSync::read_service_tables(Round& r) {
  if (r.read_service.empty()) return true;
  std::vector<std::vector<std::string>> more;
  for (const auto& id : r.read_service) more.push_back({"HGETALL", options_.prefix + ":s:" + id});
  auto replies = send(r, more);
  if (!replies) return false;
  for (std::size_t i = 0; i < r.read_service.size(); ++i) {
    const std::string& id = r.read_service[i];
    std::vector<std::pair<std::string, double>> table;
    for_each_field((*replies)[i], options_.max_flows,
                   [&](const std::string& f, const std::string& v) {
                     double value = 0;
                     if (f.size() > kMaxFieldBytes || !parse_service(v, value)) return;
                     table.emplace_back(f, value);
                   });
    ledger_.read(id, r.parsed[id].inc, std::move(table), r.deltas);
    remotes_[id].svc_version = r.parsed[id].svc;
  }
  return true;
}

// The operator changes made through other replicas since the last read,
// handed to the handler in the order they were made (false: the read
// failed).
bool FleetSync::apply_others_operations(Round& r) {
  std::function<void(const FleetOperation&)> handler;
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    handler = ops_handler_;
  }
  if (!handler || r.ops_version == ops_version_) return true;
  // The version went down: Redis restarted empty, and numbers start over.
  unsigned long long now_v = 0, was_v = 0;
  if (std::sscanf(r.ops_version.c_str(), "%llu", &now_v) != 1) now_v = 0;
  if (std::sscanf(ops_version_.c_str(), "%llu", &was_v) != 1) was_v = 0;
  if (now_v < was_v) ops_applied_.clear();
  auto replies = send(r, {{"HGETALL", options_.prefix + ":ops"}});
  if (!replies) return false;
  for (const auto& f : fresh_operations((*replies)[0], ops_applied_, origin_)) {
    handler(f.op);
    ++r.applied;
  }
  ops_version_ = r.ops_version;
  return true;
}

// What was seen of a replica outlives its absence for a while: after a
// Redis restart it is absent until it writes again, and must not then be
// charged a second time for the same service.
void FleetSync::forget_absent(const Round& r) {
  const auto forget_after =
      std::max<Steady::duration>(10 * options_.lease, std::chrono::minutes(1));
  for (auto it = remotes_.begin(); it != remotes_.end();) {
    if (r.parsed.count(it->first)) it->second.present = r.started;
    const bool forget = r.started - it->second.present > forget_after ||
                        remotes_.size() > 2 * static_cast<std::size_t>(options_.max_replicas);
    if (forget && !r.parsed.count(it->first)) {
      ledger_.forget(it->first);
      it = remotes_.erase(it);
    } else {
      ++it;
    }
  }
}

// The view for the next exchange: the live others' reports merged (moved
// out of r.parsed) with their service deltas.
void FleetSync::merge_view(Round& r) {
  std::vector<ReplicaReport> reports;
  reports.reserve(r.parsed.size());
  for (auto& [id, s] : r.parsed) reports.push_back(std::move(s.report));
  inbound_ = merge_fleet_view(options_.replica_id, reports, r.deltas);
  // Advanced once every other replica in it has published since the last
  // advanced view (a new one counts as published).
  bool all_moved = true;
  for (const auto& [id, s] : r.parsed) all_moved = all_moved && remotes_[id].moved;
  inbound_.advanced = all_moved;
  if (all_moved)
    for (const auto& [id, s] : r.parsed) remotes_[id].moved = false;
}

// The members to read next round: this round's but those gone, who also
// leave the member set.
void FleetSync::drop_gone(Round& r) {
  members_ = std::move(r.members);
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [&](const std::string& id) {
                                  return std::find(r.gone.begin(), r.gone.end(), id) !=
                                         r.gone.end();
                                }),
                 members_.end());
  if (!r.gone.empty()) {
    // Tidy the member set (a replica that comes back adds itself again; a
    // stale hash is left to whoever wrote it, just no longer read).
    std::vector<std::string> srem{"SREM", options_.prefix + ":replicas"};
    srem.insert(srem.end(), r.gone.begin(), r.gone.end());
    redis_.pipeline({srem});  // best effort, not a failed round: it is tried again
    r.sent += 1;
  }
}

// A round done: read now, and the status says so (logged if Redis is back).
void FleetSync::record_sync(const Round& r) {
  const std::string& me = options_.replica_id;
  const bool was_degraded = r.degraded;
  last_read_ = Steady::now();
  ever_read_ = true;

  const std::int64_t now_ms = unix_ms();
  std::vector<ReplicaStatus> replicas;
  replicas.push_back(ReplicaStatus{me, options_.advertise, true, now_ms, 0, seq_});
  for (const auto& [id, s] : r.parsed)
    replicas.push_back(ReplicaStatus{id, s.addr, false, s.at, now_ms - s.at, s.seq});
  bool reconnected;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    reconnected = !status_.connected && status_.failures > 0;
    status_.connected = true;
    status_.degraded = false;
    status_.syncs += 1;
    status_.last_ok_unix_ms = now_ms;
    status_.last_sync_seconds = std::chrono::duration<double>(Steady::now() - r.started).count();
    status_.holds = r.out.holds;
    status_.hold_overrides = r.out.overrides;
    status_.commands += r.sent;
    status_.operations_published += r.published;
    status_.operations_applied += r.applied;
    status_.replicas = std::move(replicas);
  }
  if (reconnected && logger_)
    logger_(false, was_degraded ? "fleet sync with Redis is back: fleet-wide accounting resumes"
                                : "fleet sync with Redis is back");
}

}  // namespace sluice::fleet
