#include "flowcontrol/controller.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "sluice/extensions.h"

namespace sluice::flowcontrol {

using registry::Band;
using registry::Flow;
using registry::Item;

namespace {

registry::PolicyFactory make_factory(const FairnessParams& params) {
  registry::PolicyFactory f;
  f.ordering = [](const std::string& type) {
    auto p = builtin_extensions().build<OrderingPolicy>(type);
    if (!p) throw std::invalid_argument("unknown ordering policy '" + type + "'");
    return p;
  };
  f.fairness = [params](const std::string& type) {
    auto p = builtin_extensions().build<FairnessPolicy>(type, params);
    if (!p) throw std::invalid_argument("unknown fairness policy '" + type + "'");
    return p;
  };
  return f;
}

int least_in_flight(const std::vector<EndpointLoad>& load, const std::vector<std::uint8_t>& room,
                    std::uint32_t& rotation) {
  const std::size_t n = load.size();
  if (n == 0) return -1;
  const std::size_t start = rotation++ % n;
  int best = -1;
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t i = (start + k) % n;
    if (!room[i]) continue;
    if (best < 0 || load[i].in_flight < load[static_cast<std::size_t>(best)].in_flight)
      best = static_cast<int>(i);
  }
  return best;
}

// A request's input or output tokens, as counted for admission: 2^32 each, so
// in-flight sums of up to 2^31 requests fit in 64 bits.
constexpr std::uint64_t kMaxRequestTokens = std::uint64_t{1} << 32;

std::uint64_t request_tokens(const QueuedRequest& r) {
  return r.input_tokens + r.max_output_tokens;
}

Decision decision(std::uint64_t cookie, std::uint64_t ticket, QueueOutcome outcome) {
  Decision d;
  d.cookie = cookie;
  d.ticket = ticket;
  d.outcome = outcome;
  return d;
}

void render_headers(const std::vector<std::pair<std::string, std::string>>& headers,
                    std::string& out) {
  for (const auto& [k, v] : headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
}

const scheduling::Request& empty_request() {
  static const scheduling::Request r;
  return r;
}

}  // namespace

Controller::Controller(ControllerConfig config, std::unique_ptr<SaturationDetector> detector,
                       Sink sink)
    : config_(std::move(config)),
      detector_(std::move(detector)),
      sink_(std::move(sink)),
      registry_(config_.registry, make_factory(config_.fairness)),
      displacement_(builtin_extensions().build<DisplacementPolicy>(config_.displacement)) {}

Controller::~Controller() = default;

void Controller::set_endpoint_count(std::size_t n) {
  load_.resize(n);
  room_.resize(n);
  removed_.resize(n, 0);
  const std::size_t old = view_.size();
  view_.resize(n);
  for (std::size_t i = old; i < n; ++i) view_[i].index = static_cast<std::uint32_t>(i);
}

void Controller::set_endpoints(const std::vector<EndpointIdentity>& endpoints) {
  std::vector<bool> present(view_.size(), false);
  for (const auto& id : endpoints) {
    std::size_t slot = view_.size();
    for (std::size_t i = 0; i < view_.size(); ++i)
      if (view_[i].address == id.address) slot = i;
    if (slot == view_.size()) {
      set_endpoint_count(slot + 1);
      present.push_back(false);
    }
    auto& v = view_[slot];
    v.address = id.address;
    v.engine = id.engine;
    if (v.labels != id.labels) {
      v.labels = id.labels;
      v.labels_version = ++labels_versions_;  // the plugins' label caches derive again
    }
    removed_[slot] = id.removed;
    present[slot] = !id.removed;
  }
  for (std::size_t i = 0; i < present.size(); ++i) removed_[i] = !present[i];
  const bool empty = std::find(present.begin(), present.end(), true) == present.end();
  if (empty != pool_empty_) {
    pool_empty_ = empty;
    if (config_.no_endpoint_ttl_set) reevaluate_deadlines();
  }
}

std::optional<Duration> Controller::effective_ttl(const std::optional<Duration>& own,
                                                  const registry::BandConfig& band) const {
  const std::optional<Duration>& limit = pool_empty_ && config_.no_endpoint_ttl_set
                                             ? config_.no_endpoint_ttl
                                         : band.ttl_set ? band.ttl
                                                        : config_.default_ttl;
  if (limit && (!own || *limit < *own)) return limit;
  return own;
}

void Controller::reevaluate_deadlines() {
  // O(queued), on the rare change of regime (the pool emptied or refilled).
  for (auto& [p, band] : registry_.bands()) {
    for (Item* i = band->newest(); i; i = i->band_prev) {
      auto& q = i->request;
      if (i->deadline_index != SIZE_MAX) heap_remove(i);
      q.ttl = effective_ttl(q.own_ttl, band->config());
      q.deadline.reset();
      if (q.ttl) q.deadline = q.enqueued + *q.ttl;
      if (q.deadline) heap_push(i);
    }
  }
  registry_.resort_ordered_bands();
}

void Controller::set_scheduler(std::unique_ptr<scheduling::Scheduler> s) {
  scheduler_ = std::move(s);
  // Candidates are the endpoints with room (gated) or every endpoint still
  // in the pool (not gated): has_room carries both.
  if (scheduler_) scheduler_->set_require_room(true);
}

void Controller::set_gated(bool gated) { gated_ = gated; }

void Controller::update_metrics(std::size_t endpoint, const EndpointMetrics& m, TimePoint now) {
  if (endpoint >= load_.size()) return;
  auto& e = load_[endpoint];
  e.has_metrics = true;
  e.metrics_time = now;
  e.waiting = m.waiting_queue_size;
  e.running = m.running_requests_size;
  e.kv_cache_usage = m.kv_cache_usage;
  // The scrape now shows what was dispatched before it (here; the other
  // replicas' count stays until their next report: conservative).
  e.dispatched_since_scrape = endpoint < remote_.size() ? remote_[endpoint].dispatched : 0;
  view_[endpoint].metrics = m;
  view_[endpoint].metrics.update_time = now;
}

std::uint64_t Controller::enqueue(const EnqueueRequest& r, TimePoint now) {
  const FlowKey key = registry_.resolve(r.flow_id, r.priority);
  auto reject = [&](QueueOutcome outcome) {
    record_queue_time(key.id, key.priority, outcome, Duration::zero());
    sink_(decision(r.cookie, 0, outcome));
    return std::uint64_t{0};
  };
  if (load_.empty()) return reject(QueueOutcome::kRejectedNoEndpoints);
  // Admitters (probabilistic-admitter): a refusal is llm-d's
  // ResourceExhausted, 429 as a full queue's.
  for (const auto& a : admitters_)
    if (!a->admit(r.priority, load_, removed_)) return reject(QueueOutcome::kRejectedCapacity);

  // A new flow id past flowControl.maxFlows takes the place of the longest
  // idle flow, or is refused when every flow has work: the flows already
  // there keep their queues and fairness state.
  Flow* admitted = registry_.admit_flow(
      key, r.flow_hash ? *r.flow_hash : registry::FlowTable::hash(key.id), now);
  if (!admitted) return reject(QueueOutcome::kRejectedCapacity);
  Flow& flow = *admitted;
  switch (registry_.would_exceed(flow, r.bytes)) {
    case registry::Limit::kNone:
      break;
    case registry::Limit::kFlow:
      flow.stats().outcomes[static_cast<int>(QueueOutcome::kRejectedCapacity)] += 1;
      return reject(QueueOutcome::kRejectedCapacity);
    case registry::Limit::kBand:
      // Within the band only a longer flow gives way (fair admission),
      // and only if the pool's global limit then admits the newcomer too:
      // otherwise nothing is evicted.
      if (!displacement_ || !displace_in_band(flow, r.bytes, now)) {
        flow.stats().outcomes[static_cast<int>(QueueOutcome::kRejectedCapacity)] += 1;
        return reject(QueueOutcome::kRejectedCapacity);
      }
      break;
    case registry::Limit::kGlobal:
      if (!displacement_ || !displace(key.priority, r.bytes, now)) {
        flow.stats().outcomes[static_cast<int>(QueueOutcome::kRejectedCapacity)] += 1;
        return reject(QueueOutcome::kRejectedCapacity);
      }
      break;
  }

  if (config_.headroom.enabled && key.priority >= config_.headroom.protected_priority)
    last_protected_arrival_ = now;
  Item* item = registry_.allocate();
  item->cookie = r.cookie;
  item->requested_priority = r.priority;
  auto& q = item->request;
  q.id = registry::FlowRegistry::ticket(item);
  q.sequence = ++sequence_;
  q.received = r.received;
  q.enqueued = now;
  q.own_ttl = r.ttl;
  q.ttl = effective_ttl(r.ttl, flow.band()->config());
  if (q.ttl) q.deadline = now + *q.ttl;
  if (r.slo_ttft) q.slo_deadline = r.received + *r.slo_ttft;
  q.byte_size = r.bytes;
  // Each share is bounded, so no sum of in-flight tokens can wrap (the
  // exchange clamps max_tokens already; the one writer does not rely on it).
  q.input_tokens = std::min(r.input_tokens, kMaxRequestTokens);
  q.max_output_tokens = std::min(r.max_output_tokens, kMaxRequestTokens);
  q.scheduling = r.scheduling;
  registry_.enqueue(item, flow, now);
  if (q.deadline) heap_push(item);
  return q.id;
}

void Controller::prefetch_enqueue(const EnqueueRequest& r, int stage) const {
  if (!r.flow_hash) return;
  registry_.prefetch_flow(r.priority, *r.flow_hash, stage);
}

namespace {

// The registry's bands below a priority, lowest first, newest first.
class RegistryDisplacementView final : public DisplacementView {
 public:
  explicit RegistryDisplacementView(registry::FlowRegistry& r) : registry_(r) {}
  void for_each_lower(int below,
                      const std::function<bool(const QueuedRequest&, int)>& visit) const override {
    auto& bands = registry_.bands();
    for (auto it = bands.rbegin(); it != bands.rend() && it->first < below; ++it)
      for (Item* i = it->second->newest(); i; i = i->band_prev)
        if (!visit(i->request, it->first)) return;
  }

 private:
  registry::FlowRegistry& registry_;
};

}  // namespace

bool Controller::displace(int priority, std::uint64_t bytes, TimePoint now) {
  const auto& rc = registry_.config();
  std::uint64_t need_requests = 0, need_bytes = 0;
  if (rc.max_requests && registry_.total_requests() + 1 > rc.max_requests)
    need_requests = registry_.total_requests() + 1 - rc.max_requests;
  if (rc.max_bytes && registry_.total_bytes() + bytes > rc.max_bytes)
    need_bytes = registry_.total_bytes() + bytes - rc.max_bytes;
  auto ids = displacement_->choose(RegistryDisplacementView(registry_), priority, need_requests,
                                   need_bytes);
  // Whatever the policy chose: only queued requests of strictly lower
  // priority, each once, and enough of them — or nothing at all.
  std::vector<Item*> victims;
  std::uint64_t freed_requests = 0, freed_bytes = 0;
  for (auto id : ids) {
    Item* i = registry_.find(id);
    if (!i || i->state != Item::State::kQueued || i->flow->key().priority >= priority) return false;
    if (std::find(victims.begin(), victims.end(), i) != victims.end()) return false;
    victims.push_back(i);
    freed_requests += 1;
    freed_bytes += i->request.byte_size;
  }
  if (freed_requests < need_requests || freed_bytes < need_bytes) return false;
  for (Item* v : victims) finalize(v, QueueOutcome::kEvictedDisplaced, now);
  return true;
}

bool Controller::displace_in_band(Flow& newcomer, std::uint64_t bytes, TimePoint now) {
  Band& band = *newcomer.band();
  const auto& bc = band.config();
  std::uint64_t need_requests = 0, need_bytes = 0;
  if (bc.max_requests && band.requests() + 1 > bc.max_requests)
    need_requests = band.requests() + 1 - bc.max_requests;
  if (bc.max_bytes && band.bytes() + bytes > bc.max_bytes)
    need_bytes = band.bytes() + bytes - bc.max_bytes;
  // The longest flow, by queued requests per unit of weight.
  Flow* longest = nullptr;
  auto length = [](const Flow& f) {
    return static_cast<double>(f.queued()) / std::max(f.weight(), 1e-9);
  };
  for (Flow* f : band.flows())
    if (f != &newcomer && f->queued() > 0 && (!longest || length(*f) > length(*longest)))
      longest = f;
  if (!longest) return false;
  // Victims from the end of its queue (the last it would serve), each only
  // while it stays longer than the newcomer would be: a walk from the tail
  // that visits no more than it takes.
  const std::size_t queued = longest->queued();
  const double w_long = std::max(longest->weight(), 1e-9);
  const double newcomer_after =
      static_cast<double>(newcomer.queued() + 1) / std::max(newcomer.weight(), 1e-9);
  std::vector<Item*> victims;
  std::uint64_t freed_requests = 0, freed_bytes = 0;
  longest->queue().for_each_from_tail([&](Item* i) {
    if (freed_requests >= need_requests && freed_bytes >= need_bytes) return false;
    const double left = static_cast<double>(queued - victims.size() - 1) / w_long;
    if (left < newcomer_after) return false;
    victims.push_back(i);
    freed_requests += 1;
    freed_bytes += i->request.byte_size;
    return true;
  });
  if (freed_requests < need_requests || freed_bytes < need_bytes) return false;
  // All or nothing: if the pool's global limit would still refuse the
  // newcomer after these evictions, evict none of them.
  const auto& rc = registry_.config();
  if ((rc.max_requests && registry_.total_requests() - freed_requests + 1 > rc.max_requests) ||
      (rc.max_bytes && registry_.total_bytes() - freed_bytes + bytes > rc.max_bytes))
    return false;
  for (Item* v : victims) finalize(v, QueueOutcome::kEvictedDisplaced, now);
  return true;
}

void Controller::finalize(Item* item, QueueOutcome outcome, TimePoint now, std::string detail) {
  item->flow->stats().outcomes[static_cast<int>(outcome)] += 1;
  record_queue_time(item->flow->key().id, item->flow->key().priority, outcome,
                    now - item->request.enqueued);
  registry_.dequeue(item, now);
  if (item->deadline_index != SIZE_MAX) heap_remove(item);
  Decision d = decision(item->cookie, registry::FlowRegistry::ticket(item), outcome);
  d.detail = std::move(detail);
  registry_.release(item);
  sink_(d);
}

void Controller::cancel(std::uint64_t ticket, TimePoint now) {
  Item* item = registry_.find(ticket);
  if (!item || item->state != Item::State::kQueued) return;
  finalize(item, QueueOutcome::kEvictedContextCancelled, now);
}

void Controller::report_output_tokens(std::uint64_t ticket, std::uint64_t total) {
  Item* item = registry_.find(ticket);
  if (!item || item->state != Item::State::kInFlight || total <= item->output_charged) return;
  Flow& flow = *item->flow;
  flow.band()->fairness().on_output_tokens(flow, total - item->output_charged);
  if (fleet_.enabled)
    charge_fleet(flow,
                 config_.fairness.output_price * static_cast<double>(total - item->output_charged));
  flow.stats().output_tokens += total - item->output_charged;
  item->output_charged = total;
}

void Controller::complete(std::uint64_t ticket, std::uint64_t total_output_tokens, TimePoint now) {
  Item* item = registry_.find(ticket);
  if (!item || item->state != Item::State::kInFlight) return;
  report_output_tokens(ticket, total_output_tokens);
  if (item->endpoint >= 0)
    if (auto* s = scheduler_for(item))
      s->completed(item->cycle,
                   item->request.scheduling ? *item->request.scheduling : empty_request(),
                   static_cast<std::uint32_t>(item->endpoint), total_output_tokens);
  if (item->endpoint >= 0 && static_cast<std::size_t>(item->endpoint) < load_.size()) {
    auto& e = load_[static_cast<std::size_t>(item->endpoint)];
    e.in_flight -= 1;
    e.in_flight_tokens -= request_tokens(item->request);
  }
  if (item->evictable) evict_list_remove(item);
  if (item->evicting) {
    item->evicting = false;
    if (revocations_pending_ > 0) {
      --revocations_pending_;
      eviction_stats_.confirmed += 1;
    }
    eviction_quiet_until_ = now + config_.eviction.grace;
  }
  item->flow->stats().completed += 1;
  item->flow->band()->fairness().on_completed(*item->flow);
  registry_.finish_in_flight(item, now);
  registry_.release(item);
}

void Controller::response_started(std::uint64_t ticket) {
  Item* item = registry_.find(ticket);
  if (!item || item->state != Item::State::kInFlight || item->endpoint < 0) return;
  // The scheduler that placed it, without counting a completion
  // (scheduler_for does that).
  scheduling::Scheduler* s = item->scheduler_epoch == scheduler_epoch_ ? scheduler_.get() : nullptr;
  for (auto& r : retired_)
    if (r.epoch == item->scheduler_epoch) s = r.scheduler.get();
  if (s)
    s->started(item->cycle, item->request.scheduling ? *item->request.scheduling : empty_request());
}

void Controller::expire(TimePoint now) {
  // llm-d: a TTL that runs out while the pool is empty is a 503
  // rejected-no-endpoints, not the client's patience.
  const QueueOutcome expired =
      pool_empty_ ? QueueOutcome::kRejectedNoEndpoints : QueueOutcome::kEvictedTTL;
  while (!deadlines_.empty() && *deadlines_.front()->request.deadline <= now)
    finalize(deadlines_.front(), expired, now);
  if (now - last_gc_ >= std::chrono::seconds(1)) {
    last_gc_ = now;
    registry_.collect_idle_flows(now, config_.flow_idle_timeout);
  }
}

std::optional<TimePoint> Controller::next_deadline() const {
  std::optional<TimePoint> next = eviction_check_at_;
  if (fleet_hold_since_) {
    const TimePoint give_up = *fleet_hold_since_ + fleet_.max_hold;
    if (!next || give_up < *next) next = give_up;
  }
  if (!deadlines_.empty() && (!next || *deadlines_.front()->request.deadline < *next))
    next = deadlines_.front()->request.deadline;
  return next;
}

bool Controller::evictable_band(int priority) const {
  const auto& e = config_.eviction;
  if (!e.enabled || priority >= 0) return false;
  return e.priorities.empty() ||
         std::find(e.priorities.begin(), e.priorities.end(), priority) != e.priorities.end();
}

void Controller::evict_list_remove(Item* item) {
  auto it = evictable_.find(item->evict_band);
  if (it != evictable_.end()) {
    auto& l = it->second;
    (item->evict_prev ? item->evict_prev->evict_next : l.head) = item->evict_next;
    (item->evict_next ? item->evict_next->evict_prev : l.tail) = item->evict_prev;
  }
  item->evict_prev = item->evict_next = nullptr;
  item->evictable = false;
}

void Controller::maybe_evict(Band& band, Item* head, TimePoint now) {
  const auto& e = config_.eviction;
  if (!e.enabled) return;
  // Stop and wait: nothing new until the last eviction is confirmed (its
  // completion) or given up on, and its grace has passed.
  if (revocations_pending_ > 0) {
    if (now - revocation_sent_ < e.confirmation_timeout) {
      eviction_check_at_ = revocation_sent_ + e.confirmation_timeout;
      return;
    }
    eviction_stats_.timed_out += revocations_pending_;
    revocations_pending_ = 0;
  }
  if (now < eviction_quiet_until_) {
    eviction_check_at_ = eviction_quiet_until_;
    return;
  }
  if (now - head->request.enqueued < e.wait_budget) {
    eviction_check_at_ = head->request.enqueued + e.wait_budget;
    return;
  }
  // Lowest evictable band first, strictly below the blocked one; newest
  // dispatch first (the least work lost).
  for (auto& [priority, list] : evictable_) {
    if (priority >= band.priority()) break;
    Item* victim = list.tail;
    if (!victim) continue;
    evict_list_remove(victim);
    victim->evicting = true;
    ++revocations_pending_;
    revocation_sent_ = now;
    eviction_stats_.issued += 1;
    victim->flow->stats().outcomes[static_cast<int>(QueueOutcome::kEvictedPreempted)] += 1;
    Decision d = decision(victim->cookie, registry::FlowRegistry::ticket(victim),
                          QueueOutcome::kEvictedPreempted);
    d.endpoint = victim->endpoint;
    sink_(d);
    eviction_check_at_ = now + e.confirmation_timeout;
    return;
  }
}

double Controller::pool_saturation_now(TimePoint now) {
  bool any_removed = false;
  for (bool r : removed_) any_removed = any_removed || r;
  if (!any_removed) return detector_->saturation(load_, now);
  active_load_.clear();
  for (std::size_t i = 0; i < load_.size(); ++i)
    if (!removed_[i]) active_load_.push_back(load_[i]);
  return detector_->saturation(active_load_, now);
}

void Controller::compute_ceilings(TimePoint now) {
  const auto& bands = registry_.bands();
  band_priorities_.clear();
  for (const auto& [p, band] : bands) band_priorities_.push_back(p);
  ceilings_.assign(band_priorities_.size(), 1.0);
  saturation_ = pool_saturation_now(now);
  usage_limit_->compute(now, saturation_, band_priorities_, ceilings_);
  last_ceilings_.resize(band_priorities_.size());
  for (std::size_t i = 0; i < band_priorities_.size(); ++i) {
    // A policy's bad value cannot open more than the detector allows.
    double c = ceilings_[i];
    if (!(c >= 0)) c = 0;  // NaN too
    ceilings_[i] = std::min(c, 1.0);
    last_ceilings_[i] = BandCeiling{band_priorities_[i], ceilings_[i]};
  }
}

Band* Controller::choose_band(TimePoint now, bool shares) {
  starving_ = nullptr;
  const bool limited = usage_limit_ && gated_;
  if (limited) compute_ceilings(now);
  Band* top = nullptr;
  std::size_t index = 0;
  for (auto& [p, band] : registry_.bands()) {
    const std::size_t i = index++;
    if (!band->backlogged()) continue;
    // Held back by its ceiling: skipped, not a stop (a lower band whose
    // ceiling lets it through still goes).
    if (limited && saturation_ >= ceilings_[i]) {
      ++ceiling_holds_;
      continue;
    }
    if (!top) {
      top = band.get();
      continue;
    }
    // A lower band whose guaranteed share has come due goes first.
    if (shares && band->config().share > 0 && band->starvation_credit >= 1.0 - 1e-9) {
      starving_ = band.get();
      return starving_;
    }
  }
  return top;
}

void Controller::account_dispatch(Band* chosen, bool used_share) {
  // Each dispatch earns every backlogged band with a share that fraction of
  // a turn; a turn is spent when the band is served through its share.
  // Credit is capped at one turn and lapses while idle: no banking.
  for (auto& [p, band] : registry_.bands()) {
    if (band->config().share <= 0) continue;
    if (!band->backlogged() && band.get() != chosen) {
      band->starvation_credit = 0;
      continue;
    }
    band->starvation_credit = std::min(1.0, band->starvation_credit + band->config().share);
  }
  if (used_share) chosen->starvation_credit = std::max(0.0, chosen->starvation_credit - 1.0);
}

void Controller::refresh_endpoint_view(TimePoint now) {
  for (std::size_t i = 0; i < view_.size(); ++i) {
    const auto& l = load_[i];
    auto& v = view_[i];
    v.has_room = room_[i];
    v.in_flight = l.in_flight;
    v.dispatched_since_scrape = l.dispatched_since_scrape;
    v.in_flight_tokens = l.in_flight_tokens;
    v.stale = !l.has_metrics || now - l.metrics_time > staleness_;
  }
}

std::string fleet_flow_key(int priority, const std::string& id) {
  std::string k = std::to_string(priority);
  k += ' ';
  k += id;
  return k;
}

void Controller::charge_fleet(const Flow& flow, double service) {
  if (service > 0) fleet_service_[fleet_flow_key(flow.key().priority, flow.key().id)] += service;
}

bool Controller::fleet_hold(Item* item, TimePoint now) {
  const Flow& flow = *item->flow;
  const int p = flow.key().priority;
  auto release = [&] {
    if (fleet_hold_since_ && fleet_hold_band_ == p) fleet_hold_since_.reset();
    return false;
  };
  // A higher band waiting on another replica takes the room first (strict
  // priority, fleet-wide); else, within the band, the flow furthest behind.
  const FleetBandBacklog* above = nullptr;
  for (auto it = fleet_backlog_.rbegin(); it != fleet_backlog_.rend() && it->first > p; ++it)
    if (it->second.queued > 0) above = &it->second;  // ends at the lowest such: any will do
  const FleetBandBacklog* same = nullptr;
  if (auto it = fleet_backlog_.find(p); it != fleet_backlog_.end()) same = &it->second;
  const FleetBandBacklog* behind = above;
  if (!behind) {
    if (!same || !same->has_counter) return release();
    const auto standing = flow.band()->fairness().fleet_standing(flow);
    if (!standing || *standing <= same->min_counter + fleet_.fairness_slack) return release();
    behind = same;
  }
  // Given up on: until that backlog moves, it does not hold this band.
  const std::pair<double, std::uint64_t> state{behind->min_counter, behind->queued};
  auto stuck = fleet_stuck_.find(p);
  if (stuck != fleet_stuck_.end()) {
    if (stuck->second == state) return release();
    fleet_stuck_.erase(stuck);
  }
  if (!fleet_hold_since_ || fleet_hold_band_ != p) {
    fleet_hold_since_ = now;
    fleet_hold_band_ = p;
  }
  if (now - *fleet_hold_since_ >= fleet_.max_hold) {
    // The flow behind has had room for max_hold and not taken it (its
    // replica cannot place it, or is slow): stop waiting for it.
    ++fleet_overrides_;
    fleet_stuck_[p] = state;
    return release();
  }
  ++fleet_holds_;
  fleet_held_now_ = true;
  return true;
}

void Controller::exchange_fleet(const FleetInbound& in, FleetOutbound& out, TimePoint now) {
  fleet_ready_ = in.ready;
  take_remote_load(in);
  const FleetDemand demand = read_fleet_backlog(in);
  if ((demand.others_queued > 0 || in.replicas > 0) && gated_)
    hold_room_for_others(in, demand, now);
  publish_own_load(out);
  take_fleet_service(in);
  publish_fleet_state(out);
}

// The other replicas' work, replacing the last view's in load_ (and what
// was left to them at the last view, until they report having used it).
void Controller::take_remote_load(const FleetInbound& in) {
  std::vector<RemoteLoad> next(load_.size());
  std::unordered_map<std::string_view, std::size_t> slot_of;
  for (std::size_t i = 0; i < view_.size() && i < next.size(); ++i) slot_of[view_[i].address] = i;
  for (const auto& e : in.endpoints)
    if (auto it = slot_of.find(e.address); it != slot_of.end())
      next[it->second] = RemoteLoad{e.in_flight, e.dispatched_since_scrape, e.in_flight_tokens};
  remote_.resize(load_.size());
  fleet_left_.resize(load_.size(), 0);
  for (std::size_t i = 0; i < load_.size(); ++i) {
    // The others reported before using what this replica left them: count
    // it as used until their next report shows it. A view that repeats
    // their reports does not: what was left stays theirs (it was kept for
    // one view only, so a replica slow to sync, or one killed before its
    // next sync, lost its room on the second repeat and the pool went one
    // over its limit).
    if (in.replicas > 0) {
      next[i].in_flight += fleet_left_[i];
      next[i].dispatched += fleet_left_[i];
    }
    if (in.advanced || in.replicas == 0) fleet_left_[i] = 0;
  }
  for (std::size_t i = 0; i < load_.size(); ++i) {
    auto& l = load_[i];
    const RemoteLoad& old = remote_[i];
    l.in_flight = l.in_flight - std::min(l.in_flight, old.in_flight) + next[i].in_flight;
    l.dispatched_since_scrape = l.dispatched_since_scrape -
                                std::min(l.dispatched_since_scrape, old.dispatched) +
                                next[i].dispatched;
    l.in_flight_tokens =
        l.in_flight_tokens - std::min(l.in_flight_tokens, old.tokens) + next[i].tokens;
  }
  remote_ = std::move(next);
}

// The others' backlog by band (into fleet_backlog_), and the demand that
// counts: requests queued in the highest band backlogged anywhere in the
// fleet (the room goes to that band first).
Controller::FleetDemand Controller::read_fleet_backlog(const FleetInbound& in) {
  fleet_backlog_.clear();
  for (const auto& b : in.backlog) fleet_backlog_[b.priority] = b;
  std::optional<int> top;
  for (const auto& b : in.backlog)
    if (b.queued > 0 && (!top || b.priority > *top)) top = b.priority;
  for (auto& [p, band] : registry_.bands())
    if (band->backlogged() && (!top || p > *top)) top = p;
  FleetDemand d;
  if (top) {
    // What the others know of this replica's demand, not what is queued now:
    // a cut made with fresher numbers here than there would not match theirs
    // (in a burst every replica would see itself alone with demand and take
    // nearly all the room). A burst gets the equal share until published.
    if (auto own = fleet_published_.find(*top); own != fleet_published_.end()) d.mine = own->second;
    if (auto it = fleet_backlog_.find(*top); it != fleet_backlog_.end()) {
      d.others_queued = it->second.queued;
      d.before = it->second.queued_before;
    }
  }
  return d;
}

// Every replica sees the same free room in the same view: were each to
// take all of it, the pool would be overshot by the room times the others.
// So the others' part of it is held for them until the next view (as if
// in flight on them): their queued demand if the room covers everyone's,
// else the room split by queued demand — and never less than their equal
// share, since a burst may reach every replica before the next view. Room
// freed here by completions after this view is this replica's own (no
// other knows it is free).
void Controller::hold_room_for_others(const FleetInbound& in, const FleetDemand& demand,
                                      TimePoint now) {
  std::vector<std::uint64_t> room(load_.size(), 0);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < load_.size(); ++i) {
    if (removed_[i]) continue;
    room[i] = room_on(i, 4096, now);
    total += room[i];
  }
  if (total == 0) return;
  // The room is cut into one slice per replica, in rank order, each as
  // wide as the replica's queued demand plus an equal share (a burst may
  // reach any replica before the next view); every replica cuts the same
  // line, so whole-request slices add up to the room.
  // The equal share is whole requests (none while the room is smaller
  // than the fleet): a fraction of one would be left, view after view,
  // to a replica with nothing to send.
  const std::uint64_t n = static_cast<std::uint64_t>(in.replicas) + 1;
  const double r = static_cast<double>(total);
  const double share = static_cast<double>(total / n);
  const double line =
      static_cast<double>(demand.mine + demand.others_queued) + share * static_cast<double>(n);
  const double start =
      static_cast<double>(demand.before) + static_cast<double>(in.rank % n) * share;
  const double end = start + static_cast<double>(demand.mine) + share;
  const auto cut = [&](double x) { return static_cast<std::uint64_t>(std::floor(x * r / line)); };
  // Nothing queued anywhere in the top band and less room than replicas:
  // nothing to share out (and no line to cut).
  const std::uint64_t grant =
      line > 0 ? std::min<std::uint64_t>(total, cut(end) - cut(start)) : total;
  hold_reserve(room, total, total - grant, in.rank);
}

// Holds `reserve` of the `total` room for the others, split over the
// endpoints by their room (largest remainders first, ties rotated by
// `rank`), as if in flight on them until the next view.
void Controller::hold_reserve(const std::vector<std::uint64_t>& room, std::uint64_t total,
                              std::uint64_t reserve, std::uint32_t rank) {
  std::vector<std::uint64_t> held(load_.size(), 0);
  std::vector<std::tuple<double, std::size_t, std::size_t>> rest;  // fraction, tie, endpoint
  std::uint64_t placed = 0;
  const std::size_t slots = load_.size();
  for (std::size_t i = 0; i < slots; ++i) {
    if (room[i] == 0) continue;
    const double exact =
        static_cast<double>(reserve) * static_cast<double>(room[i]) / static_cast<double>(total);
    held[i] = std::min(room[i], static_cast<std::uint64_t>(exact));
    placed += held[i];
    rest.emplace_back(exact - static_cast<double>(held[i]), (i + rank) % slots, i);
  }
  std::sort(rest.begin(), rest.end(), [](const auto& x, const auto& y) {
    if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) > std::get<0>(y);
    return std::get<1>(x) < std::get<1>(y);
  });
  for (const auto& [frac, tie, i] : rest) {
    if (placed >= reserve) break;
    if (held[i] < room[i]) {
      held[i] += 1;
      placed += 1;
    }
  }
  for (std::size_t i = 0; i < load_.size(); ++i) {
    const auto h = static_cast<std::uint32_t>(held[i]);
    // A repeated view still holds what it left for the same reports:
    // the larger of the two, never both (the same demand twice).
    fleet_left_[i] = std::max(fleet_left_[i], h);
    remote_[i].in_flight += h;
    remote_[i].dispatched += h;
    load_[i].in_flight += h;
    load_[i].dispatched_since_scrape += h;
  }
}

// This replica's own work: what is left without the others'.
void Controller::publish_own_load(FleetOutbound& out) {
  out.endpoints.clear();
  out.queued = registry_.total_requests();
  for (std::size_t i = 0; i < load_.size() && i < view_.size(); ++i) {
    const auto& l = load_[i];
    const RemoteLoad& r = remote_[i];
    FleetEndpointLoad own{
        view_[i].address, l.in_flight - std::min(l.in_flight, r.in_flight),
        l.dispatched_since_scrape - std::min(l.dispatched_since_scrape, r.dispatched),
        l.in_flight_tokens - std::min(l.in_flight_tokens, r.tokens)};
    if (own.in_flight > 0 || own.dispatched_since_scrape > 0 || own.in_flight_tokens > 0)
      out.endpoints.push_back(std::move(own));
  }
}

// The others' service, charged to the flows that exist here (one that
// does not is lifted to the backlog's floor when it arrives); each band's
// floor from the others' smallest backlogged counter.
void Controller::take_fleet_service(const FleetInbound& in) {
  for (const auto& [key, service] : in.service) {
    const auto space = key.find(' ');
    if (space == std::string::npos || !(service > 0)) continue;
    int priority = 0;
    const auto parsed = std::from_chars(key.data(), key.data() + space, priority);
    if (parsed.ec != std::errc() || parsed.ptr != key.data() + space) continue;
    auto band = registry_.bands().find(priority);
    if (band == registry_.bands().end()) continue;
    if (Flow* flow = band->second->flows().find(std::string_view(key).substr(space + 1)))
      band->second->fairness().on_fleet_service(*flow, service);
  }
  for (auto& [p, band] : registry_.bands()) {
    auto it = fleet_backlog_.find(p);
    band->fairness().set_fleet_floor(it == fleet_backlog_.end() || !it->second.has_counter
                                         ? std::nullopt
                                         : std::optional(it->second.min_counter));
  }
}

// This replica's service since the last exchange, its backlog by band (as
// published: the others cut the room with it) and its hold counts.
void Controller::publish_fleet_state(FleetOutbound& out) {
  out.service.assign(fleet_service_.begin(), fleet_service_.end());
  fleet_service_.clear();
  out.backlog.clear();
  fleet_published_.clear();
  for (auto& [p, band] : registry_.bands())
    if (band->backlogged()) {
      FleetBandBacklog b;
      b.priority = p;
      b.queued = band->requests();
      fleet_published_[p] = b.queued;
      if (auto m = band->fairness().fleet_backlog_min()) {
        b.has_counter = true;
        b.min_counter = *m;
      }
      out.backlog.push_back(b);
    }
  out.holds = fleet_holds_;
  out.overrides = fleet_overrides_;
}

Controller::Allowance Controller::allowance_for(int priority, TimePoint now) const {
  const auto& h = config_.headroom;
  if (!h.enabled) return Allowance::kPlain;
  if (priority >= h.protected_priority) {
    const auto& bands = registry_.bands();
    const bool top = !bands.empty() && bands.begin()->first == priority;
    return top && h.over_admission > 0 ? Allowance::kOverAdmit : Allowance::kPlain;
  }
  if (h.reserve == 0 && h.reserve_tokens == 0 && h.reserve_endpoints == 0) return Allowance::kPlain;
  if (h.lend && (!last_protected_arrival_ || now - *last_protected_arrival_ >= h.lend_after_idle)) {
    // Lent while the protected bands are idle; reclaimed as soon as one of
    // their requests waits (the slots completions free go to it first).
    bool waiting = false;
    for (const auto& [p, band] : registry_.bands()) {
      if (p < h.protected_priority) break;
      waiting = waiting || band->backlogged();
    }
    if (!waiting) return Allowance::kPlain;
  }
  return Allowance::kReserveHeld;
}

bool Controller::has_room(std::size_t i, Allowance a, TimePoint now) const {
  if (a == Allowance::kPlain) return detector_->has_room(load_[i], now);
  EndpointLoad l = load_[i];
  const auto& h = config_.headroom;
  if (a == Allowance::kReserveHeld) {
    l.in_flight += h.reserve;
    l.dispatched_since_scrape += h.reserve;
    l.in_flight_tokens += h.reserve_tokens;
  } else {
    over_admit(l, h.over_admission);
  }
  return detector_->has_room(l, now);
}

std::uint64_t Controller::room_on(std::size_t i, std::uint64_t cap, TimePoint now) const {
  std::uint64_t free = 0;
  EndpointLoad l = load_[i];
  while (free < cap && detector_->has_room(l, now)) {
    ++free;
    l.in_flight += 1;
    l.dispatched_since_scrape += 1;
  }
  return free;
}

std::uint64_t Controller::pool_free(std::uint64_t cap, TimePoint now) const {
  std::uint64_t free = 0;
  for (std::size_t i = 0; i < load_.size() && free < cap; ++i)
    if (!removed_[i]) free += room_on(i, cap - free, now);
  return free;
}

int Controller::route(Item* item, TimePoint now, Decision& d) {
  Allowance allowance = gated_ ? allowance_for(item->flow->key().priority, now) : Allowance::kPlain;
  if (allowance == Allowance::kReserveHeld && config_.headroom.pool_scope) {
    // The pool must keep `reserve` requests' room after this one.
    if (pool_free(config_.headroom.reserve + 1, now) <= config_.headroom.reserve) {
      ++headroom_holds_;
      return kWait;
    }
    allowance = Allowance::kPlain;
  }
  // Held: the pool's last reserve_endpoints endpoints (never every one in
  // it) take no lower-band request.
  std::size_t lane = 0;
  if (allowance == Allowance::kReserveHeld && config_.headroom.reserve_endpoints > 0) {
    std::size_t in_pool = 0;
    for (std::size_t i = 0; i < load_.size(); ++i) in_pool += !removed_[i];
    lane = std::min<std::size_t>(config_.headroom.reserve_endpoints, in_pool - (in_pool > 0));
  }
  // The plain case, every decision's, asks the detector for the whole pool
  // at once; the headroom allowances adjust each endpoint's load first.
  const bool each = gated_ && allowance == Allowance::kPlain;
  if (each) detector_->has_room_each(load_, now, room_);
  bool any = false;
  for (std::size_t i = load_.size(); i-- > 0;) {
    bool room;
    if (lane > 0 && !removed_[i]) {
      --lane;
      room = false;
    } else {
      room = !removed_[i] && (!gated_ || (each ? room_[i] != 0 : has_room(i, allowance, now)));
    }
    room_[i] = room ? 1 : 0;
    any = any || room;
  }
  if (!any && allowance == Allowance::kReserveHeld) ++headroom_holds_;
  if (allowance == Allowance::kReserveHeld) {
    d.held_reserve = config_.headroom.reserve;
    d.held_reserve_tokens = config_.headroom.reserve_tokens;
    d.held_endpoints = config_.headroom.reserve_endpoints;
  }
  if (!any) return gated_ ? kWait : kUnroutable;
  if (fleet_.enabled && gated_ && (!fleet_ready_ || fleet_hold(item, now))) return kFleetHold;
  // The I/O thread checks the chosen endpoint's room again: with the same
  // allowance, or it would refuse what was over-admitted.
  if (allowance == Allowance::kOverAdmit) d.over_admission = config_.headroom.over_admission;
  if (!scheduler_) return least_in_flight(load_, room_, rotation_);

  refresh_endpoint_view(now);
  const scheduling::Request& req =
      item->request.scheduling ? *item->request.scheduling : empty_request();
  scheduler_->schedule(item->cycle, req, view_, result_);
  if (!result_.ok) {
    item->cycle.clear();
    if (!gated_) {
      d.detail = result_.error;
      return kUnroutable;
    }
    // Full endpoints or no endpoint at all? Ask again as if all had room:
    // if some would do, wait for room; if none ever would, give up now.
    for (std::size_t i = 0; i < view_.size(); ++i) view_[i].has_room = !removed_[i];
    scheduler_->schedule(item->cycle, req, view_, result_);
    item->cycle.clear();
    if (result_.ok) return kWait;
    d.detail = result_.error;
    return kUnroutable;
  }
  const int ep = static_cast<int>(result_.targets.front()->index);
  for (std::size_t k = 1; k < result_.targets.size() && k <= d.fallbacks.size(); ++k)
    d.fallbacks[k - 1] = static_cast<std::int32_t>(result_.targets[k]->index);
  scheduler_->dispatched(item->cycle, req, result_);
  render_headers(result_.headers, d.request_headers);
  render_headers(result_.response_headers, d.response_headers);
  d.upstream_port = result_.upstream_port;
  d.rank_header = result_.rank_header;
  d.notify_started = scheduler_->wants_started();
  return ep;
}

// Each release's misses form a chain (the pick, its flow, its head
// item) that the next pick cannot start before this one is charged.
// The policy's guess of the picks to come lets those chains be
// started together, as many as the last pass released: once a pass,
// for the first band it serves (bands that take turns would otherwise
// start a guess's loads for every release).
void Controller::prefetch_upcoming(Band& band) {
  FlowView* upcoming[kPrefetchPicks];
  const std::size_t n =
      band.fairness().upcoming(upcoming, std::min<std::size_t>(last_released_, kPrefetchPicks));
  registry_.prefetch_releases(upcoming, n);
}

std::uint32_t Controller::dispatched_series(Flow& flow) {
  // The series is looked up once per flow (two string-keyed lookups and a
  // key built per dispatch before), not per dispatch.
  auto& series = flow.dispatched_series();
  if (series.epoch != series_epoch_) {
    series.index = static_cast<std::uint32_t>(
        series_index(flow.key().id, flow.key().priority, QueueOutcome::kDispatched));
    series.epoch = series_epoch_;
  }
  return series.index;
}

void Controller::track_evictable(Item* item, int priority) {
  if (!evictable_band(priority)) return;
  auto& l = evictable_[priority];
  item->evict_prev = l.tail;
  item->evict_next = nullptr;
  (l.tail ? l.tail->evict_next : l.head) = item;
  l.tail = item;
  item->evictable = true;
  item->evict_band = priority;
}

std::size_t Controller::dispatch(TimePoint now) {
  std::size_t released = 0;
  eviction_check_at_.reset();
  fleet_held_now_ = false;
  bool prefetched = false;
  const bool large = registry_.flow_count() >= kPrefetchFlows;
  bool shares = true;
  while (true) {
    Band* band = choose_band(now, shares);
    if (!band) break;
    if (!prefetched && release_prefetch_ && last_released_ > 1 && large) {
      prefetched = true;
      prefetch_upcoming(*band);
    }
    const bool used_share = band == starving_;
    auto* flow = static_cast<Flow*>(band->fairness().pick());
    // A backlogged band's policy always has a pick with a head; one that
    // does not (an extension's bug) stops the pass rather than the process.
    Item* item = flow ? flow->queue().head() : nullptr;
    if (!item) break;
    if (large) registry::FlowRegistry::prefetch_neighbours(item);
    Decision d =
        decision(item->cookie, registry::FlowRegistry::ticket(item), QueueOutcome::kDispatched);
    const int ep = route(item, now, d);
    if (ep == kWait) {
      // No endpoint has room: wait for a completion or a scrape, or make
      // room by evicting lower-band work in flight.
      maybe_evict(*band, item, now);
      // A due share that finds no room does not end the pass: a band
      // above it may have room of its own (reserved endpoints,
      // over-admission) and goes now, not after the next completion.
      if (used_share) {
        shares = false;
        continue;
      }
      break;
    }
    if (ep == kFleetHold) break;  // another replica's flow takes this room
    if (ep == kUnroutable) {
      finalize(item, QueueOutcome::kRejectedNoEndpoints, now, std::move(d.detail));
      continue;
    }
    d.endpoint = ep;
    d.waited = item->request.enqueued != now;
    const std::uint32_t series = dispatched_series(*flow);  // may add a series
    queue_durations_[series].histogram.record(now - item->request.enqueued);
    registry_.dequeue(item, now);
    if (item->deadline_index != SIZE_MAX) heap_remove(item);
    registry_.mark_in_flight(item, ep);
    track_evictable(item, flow->key().priority);
    item->evicting = false;
    item->scheduler_epoch = scheduler_epoch_;
    if (scheduler_) ++scheduler_in_flight_;
    auto& e = load_[static_cast<std::size_t>(ep)];
    e.in_flight += 1;
    e.dispatched_since_scrape += 1;
    e.in_flight_tokens += request_tokens(item->request);
    band->fairness().on_dispatched(*flow, item->request);
    if (fleet_.enabled)
      charge_fleet(*flow,
                   config_.fairness.input_price * static_cast<double>(item->request.input_tokens));
    flow->stats().dispatched += 1;
    flow->stats().input_tokens += item->request.input_tokens;
    account_dispatch(band, used_share);
    sink_(d);
    ++released;
  }
  // A hold not renewed by this pass (no room, nothing queued) has ended: its
  // give-up time must not stay behind as a deadline already past.
  if (!fleet_held_now_) fleet_hold_since_.reset();
  last_released_ = released;
  return released;
}

scheduling::Scheduler* Controller::scheduler_for(const Item* item) {
  if (!scheduler_ && retired_.empty()) return nullptr;
  if (item->scheduler_epoch == scheduler_epoch_) {
    if (!scheduler_) return nullptr;
    // Counted once per completion; least-in-flight routing never counted.
    if (scheduler_in_flight_ > 0) --scheduler_in_flight_;
    return scheduler_.get();
  }
  for (auto it = retired_.begin(); it != retired_.end(); ++it) {
    if (it->epoch != item->scheduler_epoch) continue;
    scheduling::Scheduler* s = it->scheduler.get();
    if (--it->in_flight == 0) {
      // Its last request: let it see the completion, then let it go.
      retired_last_ = std::move(it->scheduler);
      retired_.erase(it);
      return retired_last_.get();
    }
    return s;
  }
  return nullptr;
}

std::size_t Controller::series_index(const std::string& id, int priority, QueueOutcome outcome) {
  const std::string* label = &id;
  static const std::string kOther = "other";
  auto f = metric_flows_.find(id);
  if (f == metric_flows_.end()) {
    if (metric_flows_.size() < max_metric_flows_) {
      metric_flows_.emplace(id, true);
    } else {
      label = &kOther;
    }
  }
  auto& k = key_scratch_;
  k.assign(*label);
  k += '\0';
  k += std::to_string(priority);
  k += '\0';
  k += static_cast<char>('0' + static_cast<int>(outcome));
  auto it = queue_duration_index_.find(k);
  std::size_t index;
  if (it == queue_duration_index_.end()) {
    index = queue_durations_.size();
    queue_durations_.push_back(QueueDurationSeries{*label, priority, outcome, {}});
    queue_duration_index_.emplace(k, index);
  } else {
    index = it->second;
  }
  return index;
}

void Controller::record_queue_time(const std::string& id, int priority, QueueOutcome outcome,
                                   Duration waited) {
  queue_durations_[series_index(id, priority, outcome)].histogram.record(waited);
}

void Controller::apply(ControllerReload r, TimePoint now) {
  const bool new_prices = r.config.fairness != config_.fairness;
  registry::PolicyFactory factory = make_factory(r.config.fairness);
  registry_.apply(r.config.registry, r.weights, new_prices ? &factory : nullptr, now);
  if (r.config.displacement != config_.displacement)
    displacement_ = builtin_extensions().build<DisplacementPolicy>(r.config.displacement);
  const bool ttls_changed = r.config.default_ttl != config_.default_ttl ||
                            r.config.no_endpoint_ttl_set != config_.no_endpoint_ttl_set ||
                            r.config.no_endpoint_ttl != config_.no_endpoint_ttl;
  config_ = std::move(r.config);
  // Queued requests keep the deadline they were given, unless the pool is
  // empty and its TTL just changed (the regime's budget is re-evaluated).
  if (ttls_changed && pool_empty_) reevaluate_deadlines();
  if (r.detector) detector_ = std::move(r.detector);
  staleness_ = r.staleness;
  usage_limit_ = std::move(r.usage_limit);
  admitters_ = std::move(r.admitters);
  if (r.scheduler) {
    if (scheduler_ && scheduler_in_flight_ > 0)
      retired_.push_back(Retired{scheduler_epoch_, std::move(scheduler_), scheduler_in_flight_});
    ++scheduler_epoch_;
    scheduler_in_flight_ = 0;
    set_scheduler(std::move(r.scheduler));
  }
}

void Controller::shutdown(TimePoint now) {
  for (auto& [p, band] : registry_.bands()) {
    while (Item* i = band->newest()) finalize(i, QueueOutcome::kEvictedOther, now);
  }
}

// ---------------------------------------------------------------- deadline heap

void Controller::heap_swap(std::size_t a, std::size_t b) {
  std::swap(deadlines_[a], deadlines_[b]);
  deadlines_[a]->deadline_index = a;
  deadlines_[b]->deadline_index = b;
}

void Controller::heap_sift_up(std::size_t i) {
  while (i > 0) {
    std::size_t parent = (i - 1) / 2;
    if (!(*deadlines_[i]->request.deadline < *deadlines_[parent]->request.deadline)) break;
    heap_swap(i, parent);
    i = parent;
  }
}

void Controller::heap_sift_down(std::size_t i) {
  const std::size_t n = deadlines_.size();
  while (true) {
    std::size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && *deadlines_[l]->request.deadline < *deadlines_[m]->request.deadline) m = l;
    if (r < n && *deadlines_[r]->request.deadline < *deadlines_[m]->request.deadline) m = r;
    if (m == i) break;
    heap_swap(i, m);
    i = m;
  }
}

void Controller::heap_push(Item* item) {
  item->deadline_index = deadlines_.size();
  deadlines_.push_back(item);
  heap_sift_up(item->deadline_index);
}

void Controller::heap_remove(Item* item) {
  const std::size_t i = item->deadline_index;
  const std::size_t last = deadlines_.size() - 1;
  if (i != last) heap_swap(i, last);
  deadlines_.pop_back();
  item->deadline_index = SIZE_MAX;
  if (i < deadlines_.size()) {
    heap_sift_up(i);
    heap_sift_down(i);
  }
}

}  // namespace sluice::flowcontrol
