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

#include <array>
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

 private:
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
