// Quotas' books (issue 41, item 2): each limit's spend and what is held
// for requests in flight, reserved before a request starts and settled to
// what it used when it ends.
//
// A request's reservation is its worst case against every limit that
// applies to it (its tenant's and its key's, those whose models match),
// taken all at once or not at all: the limits are locked together (in
// address order), checked, and held, so two requests that together exceed
// a limit cannot both pass, and a refused request holds nothing. When the
// request ends, the Reservation (RAII) settles each limit to what was used
// (the answer's usage, the tokens counted on a stream, what was produced
// before a cancel or error; 0 if it never reached an engine) and releases
// the rest. A shadow limit is held and counted like the others but never
// refuses: it records that it would have.
//
// Shared by the I/O threads: one small lock per limit, held for the
// arithmetic only; the clock is handed in (unix ms, UTC), so the books are
// tested on a fake one. This is the single-replica ledger: a fleet's leases
// (item 3) bound each limit's amount per replica.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quota/limits.h"
#include "quota/window.h"

namespace sluice::quota {

// A fleet's lease round runs at most this often (its sync interval if
// longer); a request short of lease waits about one round.
inline constexpr Millis kLeaseIntervalMs = 100;

// Where a limit's capacity comes from (issue 41, items 3 and 5).
//   kSolo    this replica alone: the limit's amount (no fleet)
//   kLeased  the fleet's: a lease this replica holds, granted at its sync
//   kOpen    the fleet's, Redis unreachable, failMode open: the whole
//            amount against this replica's own spend
//   kLocal   ... failMode local: the amount / the replicas last seen
//   kClosed  ... failMode closed: nothing (503 quota_unavailable)
enum class FleetMode : std::uint8_t { kSolo, kLeased, kOpen, kLocal, kClosed };

// A limit's share of the fleet (kLeased), as the last sync left it.
struct LeaseState {
  std::uint64_t lease = 0;         // what this replica may hold and spend until the next grant
  Millis valid_until = 0;          // not used after this (0: never granted)
  std::uint64_t since = 0;         // settled here since the spend last written
  std::uint64_t pushed = 0;        // of `since`, written by the sync in flight
  std::uint64_t admitted = 0;      // reserved since the last sync asked
  std::uint64_t recent = 0;        // reserved in the round before
  std::uint64_t shortfall = 0;     // refused for want of lease since the last ask
  std::uint64_t short_before = 0;  // ... in the round before (its requests wait for this one)
  std::uint64_t peak = 0;          // the largest request since the limit became busy
  std::uint64_t fleet_used = 0;    // every replica's spend in the window, at the last grant
  std::uint64_t others = 0;        // the other replicas' leases, at the last grant
  Millis drains_at = 0;            // when the fleet's oldest counted spend leaves it
  Millis active_at = 0;            // the last reserve or settle here
  bool busy = false;               // on the ledger's list of limits to sync
  std::uint64_t waits = 0;         // requests refused as lease_short (for a wait)
  bool reset = false;              // an operator's reset, for the fleet's books too
  bool removed = false;            // its owner or the limit is gone: not synced again
};

struct Locked;  // a reservation's limits, locked (ledger.cc)

// One limit of one owner (a tenant or a key): its window and what is held.
class Limit {
 public:
  Limit(std::string owner, LimitDef def)
      : owner_(std::move(owner)), def_(std::move(def)), window_(def_.period) {}
  const std::string& owner() const { return owner_; }
  // A copy: a reload may redefine it (redefine()).
  LimitDef def() const;
  // A new definition from a reload: the spend is kept when the period is
  // the same, else counted afresh.
  void redefine(LimitDef def);

  struct Snapshot {
    std::uint64_t amount = 0, used = 0, held = 0;
    Millis resets_at = 0;
    std::uint64_t refused = 0, would_refuse = 0;
    std::uint64_t lease = 0, lease_waits = 0;
  };
  Snapshot snapshot(Millis now);
  // An operator's reset: the window counts nothing (what is held stays
  // held: those requests are still running).
  void reset();

 private:
  friend class Ledger;
  friend class Reservation;
  std::string owner_;
  mutable std::mutex mu_;
  LimitDef def_;
  Window window_;
  std::uint64_t held_ = 0;
  std::uint64_t refused_ = 0;       // requests this limit refused
  std::uint64_t would_refuse_ = 0;  // shadow: would have refused
  LeaseState lease_;                // in a fleet
};

// One limit's part of a fleet sync (Ledger::lease_asks): what this
// replica spent by bucket (written to Redis as its own, absolute: a
// rewrite after a Redis restart loses nothing), and what it wants.
struct LeaseAsk {
  std::shared_ptr<Limit> limit;
  std::string key;  // "<owner>:<name>:<period>": the same limit on every replica
  std::uint64_t amount = 0;
  Period period;
  Millis bucket_width = 0;  // sliding
  int buckets = 0;          // sliding: B
  Millis now = 0;
  std::uint64_t want = 0;
  std::uint64_t pushed = 0;
  bool reset = false;  // an operator reset it: the fleet's spend of it goes
  std::array<std::pair<std::int64_t, std::uint64_t>, Window::kMaxBuckets> own{};
  int own_n = 0;
};

// What the fleet answered one ask.
struct LeaseGrant {
  std::uint64_t lease = 0;
  std::uint64_t fleet_used = 0;  // every replica's spend in the window
  std::uint64_t others = 0;      // the other replicas' live leases
  Millis drains_at = 0;          // when its oldest counted spend leaves
  Millis valid_until = 0;        // this replica's clock
};

// A request's hold on its limits; settles when destroyed. Move-only.
class Reservation {
 public:
  static constexpr std::size_t kMaxLimits = 32;
  Reservation() = default;
  Reservation(Reservation&& o) noexcept { *this = std::move(o); }
  Reservation& operator=(Reservation&& o) noexcept;
  ~Reservation() { release(); }

  bool empty() const { return n_ == 0; }
  std::size_t size() const { return n_; }
  // The request reached an engine (it now counts as a request, and its
  // input as spent).
  void dispatched() { dispatched_ = true; }
  // What it used so far (output counted on a stream; the answer's usage).
  void used(const Usage& u) { used_ = u; }
  // Settles now to what it used and releases the rest; then empty.
  void settle(Millis now);

 private:
  friend class Ledger;
  void release();
  struct Held {
    std::shared_ptr<Limit> limit;
    std::uint64_t amount = 0;
  };
  std::array<Held, kMaxLimits> held_{};
  std::size_t n_ = 0;
  Price price_;
  Usage used_;
  bool dispatched_ = false;
  const class Ledger* ledger_ = nullptr;
};

// The limits of one owner, as configured (a reload builds new ones,
// reusing each limit of the same name: Ledger::set_owner).
using Limits = std::vector<std::shared_ptr<Limit>>;

class Ledger {
 public:
  using Clock = Millis (*)();
  // `clock` is what a Reservation settles at when destroyed unsettled.
  explicit Ledger(Clock clock, std::size_t max_owners = 100'000)
      : clock_(clock), max_owners_(max_owners) {}

  static constexpr std::size_t kMaxLimitsPerOwner = Reservation::kMaxLimits / 2;
  // An owner's limits ("t:acme", "k:key_1a2b"), replacing its previous
  // definitions (kept spend by name). A `bounded` owner (one made at a
  // request: a tenant the "*" entry covers) is one of at most max_owners
  // such: false when there are that many and none is idle (nothing spent
  // in its windows nor held: it loses nothing by being forgotten). An
  // owner from the config (a listed tenant, a key) is always kept, and
  // never forgotten but by remove_owner. false too with more than
  // kMaxLimitsPerOwner limits (the config refuses more).
  bool set_owner(const std::string& owner, const std::vector<LimitDef>& defs, bool bounded = false);
  // Its limits, or null.
  std::shared_ptr<const Limits> find(std::string_view owner) const;
  void remove_owner(std::string_view owner);
  std::vector<std::string> owner_names() const;
  std::size_t owners() const;

  struct Admit {
    Reservation reservation;
    std::optional<Refusal> refused;
    Headroom headroom;
    // The first shadow limit that would have refused it ("" none).
    std::string would_refuse;
  };
  // Reserves `worst` (and one request) of the model `model` at `price`
  // against every applying limit of `owners` (null entries skipped).
  Admit reserve(std::initializer_list<const Limits*> owners, std::string_view model,
                const Usage& worst, const Price& price, Millis now) const;

  Millis now() const { return clock_(); }

  // The fleet (any thread; read at each reserve): kSolo without one.
  // `replicas`: those last seen (kLocal's divisor).
  void set_fleet_mode(FleetMode m, std::uint32_t replicas = 1) {
    replicas_.store(std::max<std::uint32_t>(replicas, 1), std::memory_order_relaxed);
    mode_.store(m, std::memory_order_release);
  }
  FleetMode fleet_mode() const { return mode_.load(std::memory_order_acquire); }

  // The sync thread's round (kLeased, kOpen, kLocal, kClosed): an ask for
  // each busy limit (reserved or settled within `idle_ms`, or holding a
  // lease to give back), its spend snapshot taken. Each ask is answered by
  // lease_granted, or lease_failed if the fleet did not answer it.
  std::vector<LeaseAsk> lease_asks(Millis now, Millis idle_ms);
  void lease_granted(const LeaseAsk& ask, const LeaseGrant& g);
  void lease_failed(const LeaseAsk& ask);
  // An operator's reset of `l` (Limit::reset): in a fleet the next lease
  // round drops every replica's spend of it from Redis.
  // `fleet_books`: the operator's reset was made here (not another
  // replica's, sent on).
  void reset(const std::shared_ptr<Limit>& l, bool fleet_books = true);
  // Total requests told to wait for a lease so far (every limit).
  std::uint64_t lease_waits() const { return lease_waits_.load(std::memory_order_relaxed); }

 private:
  friend class Reservation;
  static constexpr std::size_t kMaxHeld = Reservation::kMaxLimits;
  static void headroom_of(const Limit& l, Headroom& h, Millis now);
  void note_lease_short(Locked& lk, const std::array<bool, kMaxHeld>& short_of,
                        const std::array<std::uint64_t, kMaxHeld>& demand, Millis now,
                        Admit& out) const;
  // A limit with fleet work to do joins the list of limits to sync (its
  // lock held).
  void mark_busy(const std::shared_ptr<Limit>& l) const;
  // A limit no longer in the table: the sync round drops it.
  static void forget(Limit& l);
  std::atomic<FleetMode> mode_{FleetMode::kSolo};
  std::atomic<std::uint32_t> replicas_{1};
  mutable std::atomic<std::uint64_t> lease_waits_{0};
  mutable std::mutex busy_mu_;
  mutable std::vector<std::shared_ptr<Limit>> busy_;

  Clock clock_;
  std::size_t max_owners_;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  bool evict_idle_locked(Millis now);
  mutable std::mutex mu_;  // the table only
  struct Entry {
    std::shared_ptr<const Limits> limits;
    bool bounded = false;
  };
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> owners_;
  std::size_t bounded_ = 0;  // owners_ entries with bounded set
  Millis scanned_at_ = 0;    // the last scan for idle owners
};

}  // namespace sluice::quota
