#include "quota/ledger.h"

#include <algorithm>

namespace sluice::quota {

namespace {

// a x b / 1e6, rounded up, saturating.
std::uint64_t per_million(std::uint64_t tokens, std::uint64_t price) {
  const unsigned __int128 v = static_cast<unsigned __int128>(tokens) * price + 999'999;
  const unsigned __int128 r = v / 1'000'000;
  return r > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(r);
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

bool insufficient_kind(const LimitDef& d) {
  return d.measure == Measure::kCost || d.period.calendar != Calendar::kNone;
}

}  // namespace

Kind kind_of(Measure m) {
  switch (m) {
    case Measure::kRequests:
      return Kind::kRequests;
    case Measure::kCost:
      return Kind::kCost;
    default:
      return Kind::kTokens;
  }
}

bool LimitDef::applies_to(std::string_view model) const {
  // No model known (a passthrough request's body is not read): it could be
  // any, so every per-model limit holds it.
  if (models.empty() || model.empty()) return true;
  for (const auto& m : models) {
    if (!m.empty() && m.back() == '*') {
      if (model.substr(0, m.size() - 1) == std::string_view(m).substr(0, m.size() - 1)) return true;
    } else if (model == m) {
      return true;
    }
  }
  return false;
}

std::uint64_t amount_of(Measure m, const Usage& u, const Price& p, bool dispatched) {
  if (!dispatched) return 0;
  switch (m) {
    case Measure::kRequests:
      return 1;
    case Measure::kInputTokens:
      return u.input_tokens;
    case Measure::kOutputTokens:
      return u.output_tokens;
    case Measure::kTokens:
      return saturating_add(u.input_tokens, u.output_tokens);
    case Measure::kCost:
      return saturating_add(per_million(u.input_tokens, p.input_per_million),
                            per_million(u.output_tokens, p.output_per_million));
  }
  return 0;
}

LimitDef Limit::def() const {
  std::lock_guard lock(mu_);
  return def_;
}

void Limit::redefine(LimitDef def) {
  std::lock_guard lock(mu_);
  if (!(def.period == def_.period)) window_ = Window(def.period);
  def_ = std::move(def);
}

Limit::Snapshot Limit::snapshot(Millis now) {
  std::lock_guard lock(mu_);
  window_.advance(now, lease_.valid_until == 0 ? def_.amount : UINT64_MAX);
  Snapshot s{def_.amount, window_.used(), held_,        window_.resets_at(),
             refused_,    would_refuse_,  lease_.lease, lease_.waits};
  if (lease_.valid_until != 0) {
    // Leased from a fleet: the fleet's spend as last synced, and this
    // replica's since.
    s.used = saturating_add(lease_.fleet_used, lease_.since);
    s.resets_at = std::max(s.resets_at, lease_.drains_at);
  }
  return s;
}

void Limit::reset() {
  std::lock_guard lock(mu_);
  window_ = Window(def_.period);
  lease_.since = 0;
  lease_.fleet_used = 0;
  lease_.reset = true;
}

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this == &o) return *this;
  release();
  for (std::size_t i = 0; i < o.n_; ++i) held_[i] = std::move(o.held_[i]);
  n_ = o.n_;
  price_ = o.price_;
  used_ = o.used_;
  dispatched_ = o.dispatched_;
  ledger_ = o.ledger_;
  o.n_ = 0;
  return *this;
}

void Reservation::release() {
  if (n_ != 0) settle(ledger_ ? ledger_->now() : 0);
}

void Reservation::settle(Millis now) {
  const bool fleet = ledger_ && ledger_->fleet_mode() != FleetMode::kSolo;
  for (std::size_t i = 0; i < n_; ++i) {
    Limit& l = *held_[i].limit;
    {
      std::lock_guard lock(l.mu_);
      // In a fleet the window is this replica's own spend, carried by the
      // fleet's books (the sync's script), not here.
      l.window_.advance(now, fleet ? UINT64_MAX : l.def_.amount);
      l.held_ -= std::min(l.held_, held_[i].amount);
      const std::uint64_t spent = amount_of(l.def_.measure, used_, price_, dispatched_);
      l.window_.add(spent);
      if (fleet) {
        l.lease_.since = saturating_add(l.lease_.since, spent);
        l.lease_.active_at = now;
        ledger_->mark_busy(held_[i].limit);
      }
    }
    held_[i].limit.reset();
  }
  n_ = 0;
}

bool Ledger::evict_idle_locked(Millis now) {
  // At most one scan a second: a table full of busy owners would otherwise
  // be walked, under the table's lock, by every new owner.
  if (scanned_at_ != 0 && now - scanned_at_ < 1000) return false;
  scanned_at_ = now;
  const std::size_t before = bounded_;
  std::erase_if(owners_, [this, now](const auto& entry) {
    // Not while a request found it (copies are made under this lock): it
    // may be about to reserve on it.
    if (!entry.second.bounded || entry.second.limits.use_count() > 1) return false;
    for (const auto& l : *entry.second.limits) {
      const auto s = l->snapshot(now);
      if (s.used != 0 || s.held != 0) return false;
    }
    for (const auto& l : *entry.second.limits) forget(*l);
    --bounded_;
    return true;
  });
  return bounded_ < before;
}

bool Ledger::set_owner(const std::string& owner, const std::vector<LimitDef>& defs, bool bounded) {
  if (defs.size() > kMaxLimitsPerOwner) return false;
  std::lock_guard lock(mu_);
  auto it = owners_.find(owner);
  if (it == owners_.end() && bounded && bounded_ >= max_owners_ && !evict_idle_locked(clock_()))
    return false;
  auto limits = std::make_shared<Limits>();
  for (const auto& d : defs) {
    std::shared_ptr<Limit> reuse;
    if (it != owners_.end())
      for (const auto& l : *it->second.limits)
        if (l->def().name == d.name) reuse = l;
    if (reuse) {
      reuse->redefine(d);
      limits->push_back(std::move(reuse));
    } else {
      limits->push_back(std::make_shared<Limit>(owner, d));
    }
  }
  if (it != owners_.end())
    for (const auto& old : *it->second.limits)
      if (std::find(limits->begin(), limits->end(), old) == limits->end()) forget(*old);
  if (it == owners_.end()) {
    owners_.emplace(owner, Entry{std::move(limits), bounded});
    bounded_ += bounded;
  } else {
    // A configured owner stays configured; a bounded one may become one.
    if (it->second.bounded && !bounded) --bounded_;
    it->second = Entry{std::move(limits), it->second.bounded && bounded};
  }
  return true;
}

std::shared_ptr<const Limits> Ledger::find(std::string_view owner) const {
  std::lock_guard lock(mu_);
  auto it = owners_.find(owner);
  return it == owners_.end() ? nullptr : it->second.limits;
}

void Ledger::remove_owner(std::string_view owner) {
  std::lock_guard lock(mu_);
  if (auto it = owners_.find(owner); it != owners_.end()) {
    for (const auto& l : *it->second.limits) forget(*l);
    bounded_ -= it->second.bounded;
    owners_.erase(it);
  }
}

std::vector<std::string> Ledger::owner_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(owners_.size());
  for (const auto& [name, limits] : owners_) out.push_back(name);
  return out;
}

std::size_t Ledger::owners() const {
  std::lock_guard lock(mu_);
  return owners_.size();
}

}  // namespace sluice::quota

namespace sluice::quota {

// The limits of a reservation, locked together in address order.
struct Locked {
  std::array<const std::shared_ptr<Limit>*, Reservation::kMaxLimits> limits{};
  std::array<std::unique_lock<std::mutex>, Reservation::kMaxLimits> locks;
  std::size_t n = 0;
};

namespace {

// How long a refused demand waits: until the window makes room for it
// beside what is held; when only what is held stands in the way (it
// settles when its requests end, at a time no one knows), until the window
// alone would, and at least a second; never (nullopt) for a demand larger
// than the limit.
std::optional<Millis> wait_for(const Window& w, std::uint64_t amount, std::uint64_t held,
                               std::uint64_t demand, Millis now) {
  if (auto at = w.fits_at(amount, held, demand)) return std::max<Millis>(0, *at - now);
  auto alone = w.fits_at(amount, 0, demand);
  if (!alone) return std::nullopt;
  return std::max<Millis>(1000, *alone - now);
}

// A refusal's wait: the longer one wins, "never" longest.
bool waits_longer(const std::optional<Millis>& a, const std::optional<Millis>& b) {
  if (!a) return b.has_value();
  return b && *a > *b;
}

void note_headroom(Headroom& h, const LimitDef& d, const Window& w, std::uint64_t held,
                   const LeaseState& s, Millis now) {
  const Kind k = kind_of(d.measure);
  if (d.shadow || k == Kind::kCost) return;
  Headroom::Of& of = k == Kind::kRequests ? h.requests : h.tokens;
  // Leased: the fleet's spend and the others' leases as last synced, and
  // this replica's own since.
  const std::uint64_t spent =
      s.valid_until != 0
          ? saturating_add(saturating_add(s.fleet_used, s.others), saturating_add(s.since, held))
          : saturating_add(w.used(), held);
  const std::uint64_t remaining = spent >= d.amount ? 0 : d.amount - spent;
  if (of.present && remaining >= of.remaining) return;
  const Millis resets = std::max(w.resets_at(), s.valid_until != 0 ? s.drains_at : 0);
  of = {true, d.amount, remaining, std::max<Millis>(0, resets - now)};
}

// Whether `demand` fits a limit now, by where its capacity comes from.
enum class Room : std::uint8_t { kFits, kShort, kOver, kUnavailable };

Room room_for(const LimitDef& d, const Window& w, std::uint64_t held, const LeaseState& s,
              std::uint64_t demand, Millis now, FleetMode mode, std::uint32_t replicas) {
  const std::uint64_t own = saturating_add(saturating_add(w.used(), held), demand);
  switch (mode) {
    case FleetMode::kSolo:
    case FleetMode::kOpen:
      return own <= d.amount ? Room::kFits : Room::kOver;
    case FleetMode::kLocal:
      return own <= d.amount / replicas + (d.amount % replicas != 0) ? Room::kFits : Room::kOver;
    case FleetMode::kClosed:
      return Room::kUnavailable;
    case FleetMode::kLeased:
      break;
  }
  const std::uint64_t mine = saturating_add(saturating_add(held, s.since), demand);
  if (now < s.valid_until && mine <= s.lease) return Room::kFits;
  if (demand > d.amount) return Room::kOver;
  // Never granted yet (a limit new here): the next sync asks for it.
  if (s.valid_until == 0) return Room::kShort;
  // The fleet's spend as last synced and this replica's hold and spend
  // since: room the next sync can lease (the others' leases are not
  // spend: an idle replica's lease goes back within two rounds).
  const std::uint64_t fleet = saturating_add(s.fleet_used, mine);
  return fleet <= d.amount ? Room::kShort : Room::kOver;
}

// How long a refused request waits under a leased limit: until the
// fleet's oldest counted spend leaves the window (or the period ends), at
// least a second.
Millis fleet_wait(const LeaseState& s, Millis now) {
  return std::max<Millis>(1000, s.drains_at - now);
}

// The limits of a reservation (each once), locked together in address
// order.
void gather(std::initializer_list<const Limits*> owners, Locked& lk) {
  for (const Limits* o : owners)
    if (o)
      for (const auto& l : *o)
        if (lk.n < Reservation::kMaxLimits) lk.limits[lk.n++] = &l;
  const auto first = lk.limits.begin();
  const auto last = first + static_cast<std::ptrdiff_t>(lk.n);
  auto by_address = [](auto* a, auto* b) { return a->get() < b->get(); };
  std::sort(first, last, by_address);
  auto same = [](auto* a, auto* b) { return a->get() == b->get(); };
  lk.n = static_cast<std::size_t>(std::unique(first, last, same) - first);
}

// How long a refused request waits, by where the limit's capacity comes
// from (nullopt: never fits).
std::optional<Millis> refusal_wait(Room room, const LimitDef& d, const Window& w,
                                   std::uint64_t held, const LeaseState& s, std::uint64_t demand,
                                   Millis now, FleetMode mode, std::uint32_t replicas) {
  if (room == Room::kUnavailable) return 1000;
  if (mode == FleetMode::kLeased)
    return demand > d.amount ? std::nullopt : std::optional<Millis>(fleet_wait(s, now));
  const std::uint64_t cap =
      mode == FleetMode::kLocal ? d.amount / replicas + (d.amount % replicas != 0) : d.amount;
  return wait_for(w, cap, held, demand, now);
}

}  // namespace

void Ledger::headroom_of(const Limit& l, Headroom& h, Millis now) {
  note_headroom(h, l.def_, l.window_, l.held_, l.lease_, now);
}

// Room in the fleet, not in this replica's lease: the next sync asks for
// what the request wanted (`short_of` its limits); it is refused as
// lease_short (the exchange waits a round for it).
void Ledger::note_lease_short(Locked& lk, const std::array<bool, kMaxHeld>& short_of,
                              const std::array<std::uint64_t, kMaxHeld>& demand, Millis now,
                              Admit& out) const {
  for (std::size_t i = 0; i < lk.n; ++i) {
    if (!short_of[i]) continue;
    Limit& l = **lk.limits[i];
    l.lease_.shortfall = saturating_add(l.lease_.shortfall, demand[i]);
    l.lease_.peak = std::max(l.lease_.peak, demand[i]);
    l.lease_.active_at = now;
    if (!l.def_.shadow) {
      ++l.lease_.waits;
      if (!out.refused) out.refused = Refusal{l.owner_, l.def_, std::nullopt, false, true};
    }
    mark_busy(*lk.limits[i]);
  }
  lease_waits_.fetch_add(1, std::memory_order_relaxed);
}

void Ledger::forget(Limit& l) {
  // A request may still hold it (it settles as usual); the fleet's books
  // of it are left to expire, this replica's lease with them.
  std::lock_guard lock(l.mu_);
  l.lease_.removed = true;
}

void Ledger::mark_busy(const std::shared_ptr<Limit>& l) const {
  if (l->lease_.busy) return;
  l->lease_.busy = true;
  std::lock_guard lock(busy_mu_);
  busy_.push_back(l);
}

Ledger::Admit Ledger::reserve(std::initializer_list<const Limits*> owners, std::string_view model,
                              const Usage& worst, const Price& price, Millis now) const {
  Admit out;
  Locked lk;
  gather(owners, lk);
  const FleetMode mode = fleet_mode();
  const std::uint32_t replicas = replicas_.load(std::memory_order_relaxed);
  const bool fleet = mode != FleetMode::kSolo;
  std::array<std::uint64_t, Reservation::kMaxLimits> demand{};
  std::array<bool, Reservation::kMaxLimits> applies{}, short_of{};
  bool lease_short = false, unavailable = false;
  for (std::size_t i = 0; i < lk.n; ++i) {
    Limit& l = **lk.limits[i];
    lk.locks[i] = std::unique_lock(l.mu_);
    applies[i] = l.def_.applies_to(model);
    if (!applies[i]) continue;
    l.window_.advance(now, fleet ? UINT64_MAX : l.def_.amount);
    demand[i] = amount_of(l.def_.measure, worst, price);
    const Room room =
        room_for(l.def_, l.window_, l.held_, l.lease_, demand[i], now, mode, replicas);
    if (room == Room::kFits) continue;
    if (room == Room::kOver && mode == FleetMode::kLeased && demand[i] <= l.def_.amount) {
      // Demand all the same: the limit keeps syncing (to see the fleet's
      // window drain) and asks for room for it as room comes.
      l.lease_.shortfall = saturating_add(l.lease_.shortfall, demand[i]);
      l.lease_.active_at = now;
      mark_busy(*lk.limits[i]);
    }
    if (l.def_.shadow) {
      // Never refuses: counted as it would have; a short lease is asked
      // for all the same.
      short_of[i] = room == Room::kShort;
      if (room != Room::kOver) continue;
      ++l.would_refuse_;
      if (out.would_refuse.empty()) out.would_refuse = l.def_.name;
      continue;
    }
    if (room == Room::kShort) {
      short_of[i] = lease_short = true;
      continue;
    }
    ++l.refused_;
    unavailable = unavailable || room == Room::kUnavailable;
    const auto wait =
        refusal_wait(room, l.def_, l.window_, l.held_, l.lease_, demand[i], now, mode, replicas);
    if (!out.refused || waits_longer(wait, out.refused->retry_after))
      out.refused = Refusal{l.owner_, l.def_, wait, insufficient_kind(l.def_)};
  }
  if (out.refused && unavailable) out.refused->unavailable = true;
  if (!out.refused && lease_short) note_lease_short(lk, short_of, demand, now, out);
  if (out.refused) {
    // OpenAI's headers on the 429 too: the limits as they stand (nothing
    // of this request held).
    for (std::size_t i = 0; i < lk.n; ++i)
      if (applies[i]) headroom_of(**lk.limits[i], out.headroom, now);
    return out;
  }
  Reservation& r = out.reservation;
  r.price_ = price;
  r.ledger_ = this;
  for (std::size_t i = 0; i < lk.n; ++i) {
    if (!applies[i]) continue;
    Limit& l = **lk.limits[i];
    l.held_ = saturating_add(l.held_, demand[i]);
    if (fleet) {
      l.lease_.admitted = saturating_add(l.lease_.admitted, demand[i]);
      l.lease_.peak = std::max(l.lease_.peak, demand[i]);
      if (short_of[i]) l.lease_.shortfall = saturating_add(l.lease_.shortfall, demand[i]);
      l.lease_.active_at = now;
      mark_busy(*lk.limits[i]);
    }
    note_headroom(out.headroom, l.def_, l.window_, l.held_, l.lease_, now);
    r.held_[r.n_++] = Reservation::Held{*lk.limits[i], demand[i]};
  }
  return out;
}

}  // namespace sluice::quota
