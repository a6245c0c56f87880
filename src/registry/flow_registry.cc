#include "registry/flow_registry.h"

#include <algorithm>
#include <cassert>
#include <new>
#include <stdexcept>

namespace sluice::registry {

// ---------------------------------------------------------------- FlowQueue

FlowQueue::FlowQueue(const flowcontrol::OrderingPolicy* ordering)
    : fifo_(ordering->is_fifo()), ordered_(ItemOrder{ordering}) {}

void FlowQueue::push(Item* item, bool newest) {
  ++size_;
  if (fifo_) {
    // Arrival order. A new request is the newest (O(1), without reading
    // the tail's request); a request moved in from another band may be
    // older than some already here.
    Item* after = last_;
    while (!newest && after && after->request.sequence > item->request.sequence)
      after = after->prev;
    item->prev = after;
    item->next = after ? after->next : first_;
    if (item->next)
      item->next->prev = item;
    else
      last_ = item;
    if (after)
      after->next = item;
    else
      first_ = item;
    return;
  }
  ordered_.insert(item);
}

void FlowQueue::remove(Item* item) {
  --size_;
  if (fifo_) {
    if (item->prev)
      item->prev->next = item->next;
    else
      first_ = item->next;
    if (item->next)
      item->next->prev = item->prev;
    else
      last_ = item->prev;
    item->prev = item->next = nullptr;
    return;
  }
  if (ordered_.erase(item) == 0) {
    // Not found by its key, which must then have changed in place (see
    // FlowRegistry::resort_ordered_bands): found by its address instead,
    // rather than left queued after its release.
    assert(false && "queued item's order key changed in place");
    auto it = std::find(ordered_.begin(), ordered_.end(), item);
    if (it != ordered_.end()) ordered_.erase(it);
  }
}

Item* FlowQueue::head() const {
  if (fifo_) return first_;
  return ordered_.empty() ? nullptr : *ordered_.begin();
}

Item* FlowQueue::tail() const {
  if (fifo_) return last_;
  return ordered_.empty() ? nullptr : *ordered_.rbegin();
}

void FlowQueue::reorder(const flowcontrol::OrderingPolicy* ordering) {
  std::vector<Item*> items;
  items.reserve(size_);
  for_each([&](Item* i) { items.push_back(i); });
  first_ = last_ = nullptr;
  ordered_ = std::set<Item*, ItemOrder>(ItemOrder{ordering});
  size_ = 0;
  fifo_ = ordering->is_fifo();
  // Arrival order is the FIFO order (and a harmless insertion order otherwise).
  std::sort(items.begin(), items.end(),
            [](const Item* a, const Item* b) { return a->request.sequence < b->request.sequence; });
  for (Item* i : items) push(i);
}

// ---------------------------------------------------------------- Flow

namespace {
using FlowPool = SlotPool<sizeof(Flow), alignof(Flow)>;
// Items per chunk of the item pool: as many as one huge page holds.
constexpr std::uint32_t kChunk = kHugePageBytes / sizeof(Item);
}  // namespace

void* Flow::operator new(std::size_t size) {
  assert(size == sizeof(Flow));
  (void)size;
  return FlowPool::instance().allocate();
}

void Flow::operator delete(void* p) noexcept { FlowPool::instance().deallocate(p); }

std::size_t Flow::pool_bytes_in_use() { return FlowPool::instance().in_use_bytes(); }
std::size_t Flow::pool_bytes_mapped() { return FlowPool::instance().mapped_bytes(); }

// ---------------------------------------------------------------- FlowRegistry

void FlowRegistry::ChunkDeleter::operator()(Item* chunk) const noexcept {
  if constexpr (kHugePages) {
    for (std::uint32_t i = 0; i < kChunk; ++i) chunk[i].~Item();
    huge_deallocate(chunk, kChunk * sizeof(Item));
  } else {
    delete[] chunk;
  }
}

FlowRegistry::FlowRegistry(RegistryConfig config, PolicyFactory factory)
    : config_(std::move(config)), factory_(std::move(factory)) {
  for (const auto& b : config_.bands) bands_[b.priority] = make_band(b, true);
}

FlowRegistry::~FlowRegistry() = default;

std::unique_ptr<Band> FlowRegistry::make_band(const BandConfig& config, bool configured) {
  auto band = std::make_unique<Band>();
  band->config_ = config;
  band->configured_ = configured;
  band->ordering_ = factory_.ordering(config.ordering);
  band->fairness_ = factory_.fairness(config.fairness);
  band->fairness_->set_ordering(band->ordering_.get());
  return band;
}

Item* FlowRegistry::allocate() {
  if (free_items_.empty()) {
    // Reserved first, so that nothing can fail once the chunk is made.
    chunks_.reserve(chunks_.size() + 1);
    free_items_.reserve(free_items_.size() + kChunk);
    Item* chunk;
    if constexpr (kHugePages) {
      chunk = static_cast<Item*>(huge_allocate(kChunk * sizeof(Item)));
      for (std::uint32_t i = 0; i < kChunk; ++i) new (chunk + i) Item();
    } else {
      chunk = new Item[kChunk]();
    }
    chunks_.emplace_back(chunk);
    for (std::uint32_t i = 0; i < kChunk; ++i) chunk[i].index = capacity_ + i;
    for (std::uint32_t i = kChunk; i > 0; --i) free_items_.push_back(capacity_ + i - 1);
    capacity_ += kChunk;
  }
  std::uint32_t index = free_items_.back();
  free_items_.pop_back();
  Item* item = chunks_[index / kChunk].get() + index % kChunk;
  const auto generation = item->generation;
  scheduling::CycleState cycle = std::move(item->cycle);  // keep its slot storage
  *item = Item{};
  item->index = index;
  item->generation = generation;
  item->cycle = std::move(cycle);
  return item;
}

void FlowRegistry::release(Item* item) {
  item->state = Item::State::kFree;
  item->flow = nullptr;
  item->request.scheduling.reset();
  item->cycle.clear();
  item->generation += 1;  // outstanding tickets for this slot go stale
  free_items_.push_back(item->index);
}

Item* FlowRegistry::find(std::uint64_t ticket) {
  const std::uint64_t low = ticket & 0xffffffffull;
  if (low == 0 || low > capacity_) return nullptr;
  const std::uint32_t index = static_cast<std::uint32_t>(low - 1);
  Item* item = chunks_[index / kChunk].get() + index % kChunk;
  if (item->state == Item::State::kFree || item->generation != (ticket >> 32)) return nullptr;
  return item;
}

FlowKey FlowRegistry::resolve(const std::string& id, int priority) const {
  auto it = overrides_.find(id);
  if (it != overrides_.end() && it->second.priority) return FlowKey{id, *it->second.priority};
  return FlowKey{id, priority};
}

Band& FlowRegistry::band(int priority) {
  auto it = bands_.find(priority);
  if (it != bands_.end()) return *it->second;
  BandConfig c = config_.template_for(priority);
  auto [pos, inserted] = bands_.emplace(priority, make_band(c, false));
  return *pos->second;
}

double FlowRegistry::weight_for(const std::string& id) const {
  auto o = overrides_.find(id);
  if (o != overrides_.end() && o->second.weight) return *o->second.weight;
  auto c = configured_weights_.find(id);
  return c != configured_weights_.end() ? c->second : 1.0;
}

Flow& FlowRegistry::flow(const FlowKey& key, TimePoint now) {
  return flow(key, FlowTable::hash(key.id), now);
}

Flow& FlowRegistry::flow(const FlowKey& key, std::uint64_t hash, TimePoint now) {
  Band& b = band(key.priority);
  if (Flow* f = b.flows_.find(key.id, hash)) return *f;
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = next_slot_++;
  }
  auto made = std::make_unique<Flow>(key, weight_for(key.id), slot, &b, b.ordering_.get());
  made->hash_ = hash;
  Flow& ref = b.flows_.insert(std::move(made), hash);
  ++flow_count_;
  ref.all_index_ = all_flows_.size();
  all_flows_.push_back(&ref);
  touch(ref, now);  // empty: idle until its first request is queued
  return ref;
}

Flow* FlowRegistry::admit_flow(const FlowKey& key, std::uint64_t hash, TimePoint now) {
  if (config_.max_flows && flow_count_ >= config_.max_flows) {
    Band& b = band(key.priority);
    if (Flow* f = b.flows_.find(key.id, hash)) return f;
    if (!idle_oldest_) {
      ++flow_limit_rejections_;
      return nullptr;
    }
    Flow* victim = idle_oldest_;
    remove_flow(*victim->band_, *victim);
  }
  return &flow(key, hash, now);
}

namespace {

// Starts loading every line of the object at `p`, for writing.
void prefetch_whole(const void* p, std::size_t size) {
  const char* at = static_cast<const char*>(p);
  for (std::size_t i = 0; i < size; i += 64) __builtin_prefetch(at + i, 1);
  __builtin_prefetch(at + size - 1, 1);
}

}  // namespace

void FlowRegistry::prefetch_flow(int priority, std::uint64_t hash, int stage) const {
  auto b = bands_.find(priority);
  if (b == bands_.end()) return;
  const FlowTable& table = b->second->flows_;
  if (stage == 0) {
    table.prefetch(hash);
    return;
  }
  const Flow* f = table.guess(hash);
  if (!f) return;
  if (stage == 1) {
    // The lines an enqueue reads or writes: the key and band; the queue;
    // the counts; the idle links at its end (Flow's layout).
    prefetch_whole(f, sizeof(Flow));
    return;
  }
  if (const Item* tail = f->queue_.list_tail()) __builtin_prefetch(tail, 1);
  // An idle flow leaves the idle list: its neighbours there are written.
  if (f->idle_linked_) {
    if (f->idle_prev_) __builtin_prefetch(&f->idle_prev_->idle_next_, 1);
    if (f->idle_next_) __builtin_prefetch(&f->idle_next_->idle_prev_, 1);
  }
}

void FlowRegistry::prefetch_releases(flowcontrol::FlowView* const* flows, std::size_t n) const {
  // The whole flow: the queue at its start, the counts and the series a
  // dispatch updates at its end.
  for (std::size_t i = 0; i < n; ++i)
    prefetch_whole(static_cast<const Flow*>(flows[i]), sizeof(Flow));
  for (std::size_t i = 0; i < n; ++i)
    if (const Item* head = static_cast<const Flow*>(flows[i])->queue_.head_if_list())
      prefetch_whole(head, sizeof(Item));
  for (std::size_t i = 0; i < n; ++i)
    if (const Item* head = static_cast<const Flow*>(flows[i])->queue_.head_if_list())
      prefetch_neighbours(head);
}

void FlowRegistry::touch(Flow& f, TimePoint now) {
  f.last_active_ = now;
  if (f.idle_linked_) unlink_idle(f);
  if (!f.queue_.empty() || f.in_flight_ != 0) return;
  // Appended as the newest: the list stays ordered by last_active_ because
  // the dispatcher's clock does not go back.
  f.idle_prev_ = idle_newest_;
  f.idle_next_ = nullptr;
  if (idle_newest_)
    idle_newest_->idle_next_ = &f;
  else
    idle_oldest_ = &f;
  idle_newest_ = &f;
  f.idle_linked_ = true;
}

void FlowRegistry::unlink_idle(Flow& f) {
  if (f.idle_prev_)
    f.idle_prev_->idle_next_ = f.idle_next_;
  else
    idle_oldest_ = f.idle_next_;
  if (f.idle_next_)
    f.idle_next_->idle_prev_ = f.idle_prev_;
  else
    idle_newest_ = f.idle_prev_;
  f.idle_prev_ = f.idle_next_ = nullptr;
  f.idle_linked_ = false;
}

Limit FlowRegistry::would_exceed(const Flow& flow, std::uint64_t bytes) const {
  auto o = overrides_.find(flow.key().id);
  if (o != overrides_.end() && o->second.max_queued && flow.queued() + 1 > *o->second.max_queued)
    return Limit::kFlow;
  const Band& b = *flow.band();
  const auto& bc = b.config();
  if ((bc.max_requests && b.requests_ + 1 > bc.max_requests) ||
      (bc.max_bytes && b.bytes_ + bytes > bc.max_bytes))
    return Limit::kBand;
  if ((config_.max_requests && requests_ + 1 > config_.max_requests) ||
      (config_.max_bytes && bytes_ + bytes > config_.max_bytes))
    return Limit::kGlobal;
  return Limit::kNone;
}

void FlowRegistry::link_band(Band& band, Item* item, bool newest) {
  // Arrival order, as in FlowQueue::push: O(1) for a new request.
  Item* after = band.newest_;
  while (!newest && after && after->request.sequence > item->request.sequence)
    after = after->band_prev;
  item->band_prev = after;
  item->band_next = after ? after->band_next : band.oldest_;
  if (item->band_next)
    item->band_next->band_prev = item;
  else
    band.newest_ = item;
  if (after)
    after->band_next = item;
  else
    band.oldest_ = item;
}

void FlowRegistry::unlink_band(Band& band, Item* item) {
  if (item->band_prev)
    item->band_prev->band_next = item->band_next;
  else
    band.oldest_ = item->band_next;
  if (item->band_next)
    item->band_next->band_prev = item->band_prev;
  else
    band.newest_ = item->band_prev;
  item->band_prev = item->band_next = nullptr;
}

void FlowRegistry::enqueue(Item* item, Flow& flow, TimePoint now) {
  Band& b = *flow.band_;
  const Item* old_head = flow.queue_.head();
  item->flow = &flow;
  item->request.flow = &flow.key_;
  item->state = Item::State::kQueued;
  // Newer than every request queued so far (the common case: a newcomer,
  // not one moved between bands) goes last without reading its neighbours.
  const bool newest = item->request.sequence > newest_sequence_;
  if (newest) newest_sequence_ = item->request.sequence;
  flow.queue_.push(item, newest);
  link_band(b, item, newest);
  const auto bytes = item->request.byte_size;
  flow.bytes_ += bytes;
  b.requests_ += 1;
  b.bytes_ += bytes;
  requests_ += 1;
  bytes_ += bytes;
  touch(flow, now);
  if (!old_head) {
    b.backlogged_ += 1;
    b.fairness_->on_backlogged(flow);
  } else if (flow.queue_.head() != old_head) {
    b.fairness_->on_head_changed(flow);
  }
}

void FlowRegistry::dequeue(Item* item, TimePoint now) {
  Flow& flow = *item->flow;
  Band& b = *flow.band_;
  const bool was_head = flow.queue_.head() == item;
  flow.queue_.remove(item);
  unlink_band(b, item);
  const auto bytes = item->request.byte_size;
  flow.bytes_ -= bytes;
  b.requests_ -= 1;
  b.bytes_ -= bytes;
  requests_ -= 1;
  bytes_ -= bytes;
  touch(flow, now);
  if (flow.queue_.empty()) {
    b.backlogged_ -= 1;
    b.fairness_->on_idle(flow);
  } else if (was_head) {
    b.fairness_->on_head_changed(flow);
  }
}

void FlowRegistry::mark_in_flight(Item* item, int endpoint) {
  item->state = Item::State::kInFlight;
  item->endpoint = endpoint;
  item->flow->in_flight_ += 1;
  if (item->flow->idle_linked_) unlink_idle(*item->flow);
}

void FlowRegistry::finish_in_flight(Item* item, TimePoint now) {
  item->flow->in_flight_ -= 1;
  touch(*item->flow, now);
}

void FlowRegistry::remove_flow(Band& band, Flow& flow) {
  // Swap-remove from the list of flows. The last flow takes this one's
  // place: if that moves it from the part a copy in progress has still to
  // visit into the part it has visited, copy it now (if that fails, the copy
  // is abandoned and the next step begins a new one: removal never throws
  // because of it).
  const std::size_t at = flow.all_index_;
  Flow* last = all_flows_.back();
  if (copying_ && at < copy_cursor_ && last->all_index_ >= copy_cursor_) {
    try {
      copy_.push_back(summarize(*last));
    } catch (const std::bad_alloc&) {
      abandon_flow_copy();
    }
  }
  all_flows_[at] = last;
  last->all_index_ = at;
  all_flows_.pop_back();
  copy_end_ = std::min(copy_end_, all_flows_.size());
  copy_cursor_ = std::min(copy_cursor_, copy_end_);
  if (flow.idle_linked_) unlink_idle(flow);
  band.fairness_->on_removed(flow);
  free_slots_.push_back(flow.slot_);
  --flow_count_;
  band.flows_.erase(flow.key_.id, flow.hash_);  // destroys `flow`
}

FlowSummary FlowRegistry::summarize(const Flow& f) {
  FlowSummary s;
  s.id = f.key_.id;
  s.priority = f.key_.priority;
  s.band = f.band_->priority();
  s.weight = f.weight_;
  s.queued = f.queue_.size();
  s.bytes = f.bytes_;
  s.in_flight = f.in_flight_;
  s.last_active = f.last_active_;
  s.stats = f.stats_;
  return s;
}

void FlowRegistry::begin_flow_copy() {
  copying_ = true;
  copy_cursor_ = 0;
  // Flows made from now on are appended past this end: the copy ends after
  // the flows there are now, however fast new ones come. (A swap-remove only
  // ever moves a flow to a lower index, so none of these moves past it.)
  copy_end_ = all_flows_.size();
  copy_.clear();
  copy_.reserve(all_flows_.size());
}

bool FlowRegistry::continue_flow_copy(std::size_t n, std::vector<FlowSummary>& out) {
  if (!copying_) begin_flow_copy();
  const std::size_t end = std::min(copy_end_, copy_cursor_ + n);
  for (; copy_cursor_ < end; ++copy_cursor_) copy_.push_back(summarize(*all_flows_[copy_cursor_]));
  if (copy_cursor_ < copy_end_) return false;
  copying_ = false;
  out = std::move(copy_);
  copy_ = {};
  return true;
}

std::size_t FlowRegistry::collect_idle_flows(TimePoint now, Duration idle) {
  std::size_t removed = 0;
  while (idle_oldest_ && now - idle_oldest_->last_active_ >= idle) {
    remove_flow(*idle_oldest_->band_, *idle_oldest_);
    ++removed;
  }
  return removed;
}

// ---------------------------------------------------------------- runtime updates

void FlowRegistry::move_flow_items(const std::string& id, TimePoint now) {
  // Every queued item of `id` that is not where resolve() now puts it moves
  // there, keeping its enqueue time, deadline and arrival order. Limits are
  // not checked: an operator's change never drops a request.
  std::vector<Item*> moving;
  for (auto& [priority, band] : bands_) {
    Flow* f = band->flows_.find(id);
    if (!f) continue;
    const int here = priority;  // clang 14 cannot capture a structured binding
    f->queue_.for_each([&](Item* i) {
      if (resolve(id, i->requested_priority).priority != here) moving.push_back(i);
    });
  }
  for (Item* i : moving) {
    dequeue(i, now);
    enqueue(i, flow(resolve(id, i->requested_priority), now), now);
  }
}

void FlowRegistry::set_flow_override(const std::string& id, const FlowOverride& o, TimePoint now) {
  overrides_[id] = o;
  const double w = weight_for(id);
  for (auto& [p, band] : bands_) {
    if (Flow* f = band->flows_.find(id)) f->weight_ = w;
  }
  move_flow_items(id, now);
}

void FlowRegistry::clear_flow_override(const std::string& id, TimePoint now) {
  overrides_.erase(id);
  set_flow_override(id, FlowOverride{}, now);
  overrides_.erase(id);
}

void FlowRegistry::apply_band_config(Band& band, const BandConfig& config, bool rebuild_fairness) {
  const bool new_ordering = band.config_.ordering != config.ordering;
  const bool new_fairness = band.config_.fairness != config.fairness || rebuild_fairness;
  band.config_ = config;
  if (new_ordering) {
    // The old policy must outlive the queues' comparators until they switch.
    auto old = std::move(band.ordering_);
    band.ordering_ = factory_.ordering(config.ordering);
    for (Flow* flow : band.flows_) flow->queue_.reorder(band.ordering_.get());
  }
  if (new_fairness || new_ordering) {
    // A fresh policy learns the backlogged flows again (VTC counters restart
    // level, which is the fair choice after an operator's change).
    band.fairness_ = factory_.fairness(config.fairness);
    band.fairness_->set_ordering(band.ordering_.get());
    for (Flow* flow : band.flows_)
      if (!flow->queue_.empty()) band.fairness_->on_backlogged(*flow);
  }
}

void FlowRegistry::resort_ordered_bands() {
  for (auto& [priority, band] : bands_) {
    if (band->ordering_->is_fifo()) continue;
    for (Flow* flow : band->flows_) flow->queue_.reorder(band->ordering_.get());
    band->fairness_->set_ordering(band->ordering_.get());
  }
}

void FlowRegistry::set_band(const BandConfig& config, TimePoint now) {
  (void)now;
  auto it = bands_.find(config.priority);
  if (it == bands_.end()) {
    bands_[config.priority] = make_band(config, true);
    return;
  }
  it->second->configured_ = true;
  apply_band_config(*it->second, config);
}

void FlowRegistry::remove_band(int priority, TimePoint now) {
  (void)now;
  auto it = bands_.find(priority);
  if (it == bands_.end()) return;
  BandConfig c = config_.template_for(priority);
  it->second->configured_ = false;
  apply_band_config(*it->second, c);
  if (it->second->flows_.empty()) bands_.erase(it);
}

void FlowRegistry::apply(const RegistryConfig& config,
                         const std::unordered_map<std::string, double>& weights,
                         const PolicyFactory* factory, TimePoint now) {
  if (factory) factory_ = *factory;
  const bool rebuild = factory != nullptr;
  config_.max_bytes = config.max_bytes;
  config_.max_requests = config.max_requests;
  config_.default_band = config.default_band;
  config_.default_negative_band = config.default_negative_band;
  config_.bands = config.bands;
  std::map<int, const BandConfig*> wanted;
  for (const auto& b : config.bands) wanted[b.priority] = &b;
  for (auto it = bands_.begin(); it != bands_.end();) {
    Band& band = *it->second;
    auto w = wanted.find(band.priority());
    if (w != wanted.end()) {
      band.configured_ = true;
      apply_band_config(band, *w->second, rebuild);
      ++it;
      continue;
    }
    BandConfig c = config_.template_for(band.priority());
    band.configured_ = false;
    apply_band_config(band, c, rebuild);
    if (band.flows_.empty()) {
      it = bands_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [priority, b] : wanted)
    if (!bands_.count(priority)) bands_[priority] = make_band(*b, true);
  configured_weights_ = weights;
  for (auto& [p, band] : bands_)
    for (Flow* flow : band->flows_) flow->weight_ = weight_for(flow->key_.id);
  (void)now;
}

}  // namespace sluice::registry
