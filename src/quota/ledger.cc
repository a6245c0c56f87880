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
  window_.advance(now, def_.amount);
  return {def_.amount, window_.used(), held_, window_.resets_at(), refused_, would_refuse_};
}

void Limit::reset() {
  std::lock_guard lock(mu_);
  window_ = Window(def_.period);
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
  for (std::size_t i = 0; i < n_; ++i) {
    Limit& l = *held_[i].limit;
    {
      std::lock_guard lock(l.mu_);
      l.window_.advance(now, l.def_.amount);
      l.held_ -= std::min(l.held_, held_[i].amount);
      l.window_.add(amount_of(l.def_.measure, used_, price_, dispatched_));
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

namespace {

// The limits of a reservation, locked together in address order.
struct Locked {
  std::array<const std::shared_ptr<Limit>*, Reservation::kMaxLimits> limits{};
  std::array<std::unique_lock<std::mutex>, Reservation::kMaxLimits> locks;
  std::size_t n = 0;
};

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
                   Millis now) {
  const Kind k = kind_of(d.measure);
  if (d.shadow || k == Kind::kCost) return;
  Headroom::Of& of = k == Kind::kRequests ? h.requests : h.tokens;
  const std::uint64_t spent = saturating_add(w.used(), held);
  const std::uint64_t remaining = spent >= d.amount ? 0 : d.amount - spent;
  if (of.present && remaining >= of.remaining) return;
  of = {true, d.amount, remaining, std::max<Millis>(0, w.resets_at() - now)};
}

}  // namespace

Ledger::Admit Ledger::reserve(std::initializer_list<const Limits*> owners, std::string_view model,
                              const Usage& worst, const Price& price, Millis now) const {
  Admit out;
  Locked lk;
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
  std::array<std::uint64_t, Reservation::kMaxLimits> demand{};
  std::array<bool, Reservation::kMaxLimits> applies{};
  for (std::size_t i = 0; i < lk.n; ++i) {
    Limit& l = **lk.limits[i];
    lk.locks[i] = std::unique_lock(l.mu_);
    applies[i] = l.def_.applies_to(model);
    if (!applies[i]) continue;
    l.window_.advance(now, l.def_.amount);
    demand[i] = amount_of(l.def_.measure, worst, price);
    const std::uint64_t after =
        saturating_add(saturating_add(l.window_.used(), l.held_), demand[i]);
    if (after <= l.def_.amount) continue;
    if (l.def_.shadow) {
      ++l.would_refuse_;
      if (out.would_refuse.empty()) out.would_refuse = l.def_.name;
      continue;
    }
    ++l.refused_;
    const auto wait = wait_for(l.window_, l.def_.amount, l.held_, demand[i], now);
    if (!out.refused || waits_longer(wait, out.refused->retry_after))
      out.refused = Refusal{l.owner_, l.def_, wait, insufficient_kind(l.def_)};
  }
  if (out.refused) {
    // OpenAI's headers on the 429 too: the limits as they stand (nothing
    // of this request held).
    for (std::size_t i = 0; i < lk.n; ++i)
      if (applies[i]) {
        const Limit& l = **lk.limits[i];
        note_headroom(out.headroom, l.def_, l.window_, l.held_, now);
      }
    return out;
  }
  Reservation& r = out.reservation;
  r.price_ = price;
  r.ledger_ = this;
  for (std::size_t i = 0; i < lk.n; ++i) {
    if (!applies[i]) continue;
    Limit& l = **lk.limits[i];
    l.held_ = saturating_add(l.held_, demand[i]);
    note_headroom(out.headroom, l.def_, l.window_, l.held_, now);
    r.held_[r.n_++] = Reservation::Held{*lk.limits[i], demand[i]};
  }
  return out;
}

}  // namespace sluice::quota
