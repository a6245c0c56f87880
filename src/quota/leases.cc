// The ledger's side of a fleet's leases (issue 41, item 3): what the sync
// thread asks the fleet for each busy limit, and what it does with the
// answer. The arithmetic that bounds the fleet is the script's (in
// fleet/quota_leases.cc): a replica's lease is at most the limit less
// every replica's spend in the window and the other replicas' leases; here
// a replica keeps within its lease (Ledger::reserve) and reports its spend.
#include <algorithm>
#include <cstdio>

#include "quota/ledger.h"

namespace sluice::quota {

namespace {

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// The limit's period in its fleet key: two replicas with different
// periods for one name (a reload rolling out) keep separate books.
std::string period_tag(const Period& p) {
  switch (p.calendar) {
    case Calendar::kDay:
      return "day";
    case Calendar::kMonth:
      return "month";
    case Calendar::kNone:
      break;
  }
  return std::to_string(p.window) + "ms";
}

}  // namespace

std::vector<LeaseAsk> Ledger::lease_asks(Millis now, Millis idle_ms) {
  std::vector<std::shared_ptr<Limit>> busy;
  {
    std::lock_guard lock(busy_mu_);
    busy.swap(busy_);
  }
  std::vector<LeaseAsk> asks;
  std::vector<std::shared_ptr<Limit>> still;
  asks.reserve(busy.size());
  for (auto& lp : busy) {
    Limit& l = *lp;
    std::lock_guard lock(l.mu_);
    LeaseState& s = l.lease_;
    const bool active = now - s.active_at <= idle_ms;
    // Idle, holding nothing, owing no spend, leasing nothing: off the list
    // until it is used again (its fleet books expire with its windows).
    if (s.removed || (!active && l.held_ == 0 && s.since == 0 && s.lease == 0 && !s.reset)) {
      s.busy = false;
      s.peak = 0;
      continue;
    }
    LeaseAsk a;
    a.limit = lp;
    a.key = l.owner_ + ":" + l.def_.name + ":" + period_tag(l.def_.period);
    a.amount = l.def_.amount;
    a.period = l.def_.period;
    a.bucket_width = l.window_.bucket_width();
    a.buckets = l.window_.buckets();
    a.now = now;
    l.window_.advance(now, UINT64_MAX);
    a.own_n = l.window_.export_counts(a.own);
    a.pushed = s.since;
    s.pushed = s.since;
    a.reset = s.reset;
    s.reset = false;
    // What it holds; twice its demand of the last two rounds (room for
    // growth until the next), at least its largest request while it is
    // busy (a request now and then never waits); and what waited for a
    // lease in this round and the last (a waiting request retries within
    // two rounds). Nothing more once idle: the lease goes back.
    const std::uint64_t recent = std::max(s.admitted, s.recent);
    const std::uint64_t demand = active ? sat_add(std::max(sat_add(recent, recent), s.peak),
                                                  sat_add(s.shortfall, s.short_before))
                                        : 0;
    a.want = sat_add(l.held_, demand);
    // Until the grant comes, no more than the fleet will count as this
    // replica's (the script grants at least the old lease's rest, up to
    // `want`): a lease never shrinks in flight.
    s.lease = std::min(s.lease, sat_add(a.pushed, a.want));
    s.recent = s.admitted;
    s.admitted = 0;
    s.short_before = s.shortfall;
    s.shortfall = 0;
    asks.push_back(std::move(a));
    still.push_back(lp);
  }
  if (!still.empty()) {
    std::lock_guard lock(busy_mu_);
    busy_.insert(busy_.end(), std::make_move_iterator(still.begin()),
                 std::make_move_iterator(still.end()));
  }
  return asks;
}

void Ledger::lease_granted(const LeaseAsk& ask, const LeaseGrant& g) {
  Limit& l = *ask.limit;
  std::lock_guard lock(l.mu_);
  LeaseState& s = l.lease_;
  // What the ask wrote is in the fleet's spend now.
  s.since -= std::min(s.since, ask.pushed);
  s.pushed = 0;
  s.lease = g.lease;
  s.valid_until = g.valid_until;
  s.fleet_used = g.fleet_used;
  s.others = g.others;
  s.drains_at = g.drains_at;
}

void Ledger::lease_failed(const LeaseAsk& ask) {
  Limit& l = *ask.limit;
  std::lock_guard lock(l.mu_);
  // Its spend is written again at the next ask (absolute: a write that
  // did land is rewritten with the same numbers).
  l.lease_.pushed = 0;
  l.lease_.reset = l.lease_.reset || ask.reset;
}

void Ledger::reset(const std::shared_ptr<Limit>& l, bool fleet_books) {
  l->reset();
  std::lock_guard lock(l->mu_);
  // Another replica's reset (sent to every replica, and stored: applied
  // again when a replica starts) empties this replica's own books only;
  // the fleet's are emptied by the replica that took the operator's.
  l->lease_.reset = fleet_books;
  if (fleet_mode() == FleetMode::kSolo) return;
  l->lease_.active_at = now();
  mark_busy(l);
}

}  // namespace sluice::quota
