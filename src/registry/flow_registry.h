// FlowRegistry: priority bands, the flows in each band, and their queues.
//
// Owned and mutated by the dispatcher thread only (single writer). Holds no
// policy logic beyond keeping each band's fairness policy informed of flows
// becoming backlogged, idle, or getting a new head.
//
// Queued requests live in Items taken from a pool and addressed by a ticket
// (slot index + generation), so a late cancel for a finished request is
// recognised and ignored, and no allocation happens per request once the
// pool has grown.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "registry/flow_table.h"
#include "registry/huge_pages.h"
#include "sluice/flowcontrol/outcome.h"
#include "sluice/flowcontrol/policies.h"
#include "sluice/flowcontrol/types.h"
#include "sluice/scheduling/cycle_state.h"

namespace sluice::registry {

using flowcontrol::Duration;
using flowcontrol::FlowKey;
using flowcontrol::QueuedRequest;
using flowcontrol::TimePoint;

class Flow;
class Band;

// Laid out for the dispatcher's cache misses: with thousands of flows each
// queue operation touches random items (a newcomer is linked after its
// flow's tail and the band's newest; a release unlinks the head from its
// neighbours), so the links and what identifies an item fill its first 64
// bytes, and the request follows. (Aligning items to a line measured no
// faster and cost 32 bytes per queued request.)
struct Item {
  enum class State : std::uint8_t { kFree, kQueued, kInFlight };

  // FIFO flow queue links.
  Item* prev = nullptr;
  Item* next = nullptr;
  // Band arrival list (oldest .. newest), for displacement.
  Item* band_prev = nullptr;
  Item* band_next = nullptr;
  Flow* flow = nullptr;
  std::uint32_t generation = 0;
  std::uint32_t index = 0;  // slot in the pool
  State state = State::kFree;
  bool evictable = false;
  bool evicting = false;
  int requested_priority = 0;         // as classified; a pin may place it elsewhere
  int endpoint = -1;                  // while in flight
  std::uint32_t scheduler_epoch = 0;  // which scheduler placed it (reloads replace it)

  QueuedRequest request;
  std::uint64_t cookie = 0;               // the caller's handle for whoever waits on it
  std::uint64_t output_charged = 0;       // output tokens already charged to fairness
  std::size_t deadline_index = SIZE_MAX;  // position in the controller's deadline heap
  // The scheduling cycle's state: lives from dispatch to completion; its
  // storage is reused by the slot's next request.
  scheduling::CycleState cycle;
  // In flight in an evictable band: the controller's list of them (oldest
  // dispatch .. newest), and whether an eviction was sent.
  Item* evict_prev = nullptr;
  Item* evict_next = nullptr;
  int evict_band = 0;  // the list it is on
};

// Orders items by the band's ordering policy, then by arrival.
struct ItemOrder {
  const flowcontrol::OrderingPolicy* policy;
  bool operator()(const Item* a, const Item* b) const {
    if (policy->before(a->request, b->request)) return true;
    if (policy->before(b->request, a->request)) return false;
    return a->request.sequence < b->request.sequence;
  }
};

// One flow's queue: an intrusive FIFO list when the ordering policy is
// arrival order, otherwise an ordered tree. Both give O(1) head and tail and
// removal by handle in O(1) (list) or O(log n) (tree).
class FlowQueue {
 public:
  explicit FlowQueue(const flowcontrol::OrderingPolicy* ordering);

  // `newest`: the item is known to go last (arrival order), as a
  // newcomer does.
  void push(Item* item, bool newest = false);
  void remove(Item* item);
  Item* head() const;
  Item* tail() const;  // the one that would go last
  // The tail when the queue is a list, without a load beyond the queue
  // itself (for prefetching); null otherwise.
  Item* list_tail() const { return fifo_ ? last_ : nullptr; }
  Item* head_if_list() const { return fifo_ ? first_ : nullptr; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Switches ordering, keeping every item.
  void reorder(const flowcontrol::OrderingPolicy* ordering);
  template <class F>
  void for_each(F&& f) const {
    if (fifo_) {
      for (Item* i = first_; i; i = i->next) f(i);
    } else {
      for (Item* i : ordered_) f(i);
    }
  }
  // Last to first, while `f` returns true: costs what it visits.
  template <class F>
  void for_each_from_tail(F&& f) const {
    if (fifo_) {
      for (Item* i = last_; i; i = i->prev)
        if (!f(i)) return;
    } else {
      for (auto it = ordered_.rbegin(); it != ordered_.rend(); ++it)
        if (!f(*it)) return;
    }
  }

 private:
  bool fifo_;
  std::size_t size_ = 0;
  Item* first_ = nullptr;
  Item* last_ = nullptr;
  std::set<Item*, ItemOrder> ordered_;
};

struct FlowStats {
  std::uint64_t dispatched = 0;
  std::uint64_t completed = 0;
  std::uint64_t outcomes[kQueueOutcomeCount] = {};  // by QueueOutcome
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
};

class Flow final : public flowcontrol::FlowView {
 public:
  Flow(FlowKey key, double weight, std::uint32_t slot, Band* band,
       const flowcontrol::OrderingPolicy* ordering)
      : key_(std::move(key)), band_(band), queue_(ordering), weight_(weight), slot_(slot) {}

  // Flows come from a pool of slots on huge pages (see huge_pages.h).
  static void* operator new(std::size_t size);
  static void operator delete(void* p) noexcept;
  // Bytes of the pool's slots in use (for the memory benchmarks), and of
  // the huge pages it has mapped for them.
  static std::size_t pool_bytes_in_use();
  static std::size_t pool_bytes_mapped();

  const FlowKey& key() const override { return key_; }
  double weight() const override { return weight_; }
  std::size_t queued() const override { return queue_.size(); }
  const QueuedRequest* head() const override {
    Item* h = queue_.head();
    return h ? &h->request : nullptr;
  }
  std::uint32_t slot() const override { return slot_; }

  Band* band() const { return band_; }
  FlowQueue& queue() { return queue_; }
  const FlowQueue& queue() const { return queue_; }
  std::uint64_t bytes() const { return bytes_; }
  std::uint32_t in_flight() const { return in_flight_; }
  TimePoint last_active() const { return last_active_; }
  FlowStats& stats() { return stats_; }
  const FlowStats& stats() const { return stats_; }
  // The controller's cache of this flow's queue-duration series for its
  // dispatches (an index into its series, valid while `epoch` matches).
  struct SeriesCache {
    std::uint32_t index = UINT32_MAX;
    std::uint32_t epoch = 0;
  };
  SeriesCache& dispatched_series() { return dispatched_series_; }

 private:
  friend class FlowRegistry;
  // What a lookup and every queue operation read first, then the counts a
  // decision updates (see Item for why).
  FlowKey key_;
  std::uint64_t hash_ = 0;  // FlowTable::hash of the id
  Band* band_;
  FlowQueue queue_;
  std::uint64_t bytes_ = 0;
  TimePoint last_active_{};
  double weight_;
  std::uint32_t slot_;
  std::uint32_t in_flight_ = 0;
  bool idle_linked_ = false;
  FlowStats stats_;
  SeriesCache dispatched_series_;
  std::size_t all_index_ = 0;  // position in the registry's list of flows
  // The registry's idle list (empty, nothing in flight), oldest first.
  Flow* idle_prev_ = nullptr;
  Flow* idle_next_ = nullptr;
};

// A band's settings (GIE flowControl.priorityBands[] plus sluice additions).
struct BandConfig {
  int priority = 0;
  std::uint64_t max_bytes = 0;     // 0: unlimited
  std::uint64_t max_requests = 0;  // 0: unlimited
  std::string fairness = "global-strict-fairness-policy";
  std::string ordering = "fcfs-ordering-policy";
  // Anti-starvation: the fraction of dispatches this band is guaranteed while
  // backlogged, even under constant higher-priority load (0: strict priority).
  double share = 0;
  // llm-d's per-band defaultRequestTTL: when set, it replaces the
  // controller's default TTL for this band (none: no TTL in this band).
  bool ttl_set = false;
  std::optional<flowcontrol::Duration> ttl;
};

// Builds policies by type name; throws std::invalid_argument for unknown ones
// (config validation reports them before this is reached).
struct PolicyFactory {
  std::function<std::unique_ptr<flowcontrol::OrderingPolicy>(const std::string&)> ordering;
  std::function<std::unique_ptr<flowcontrol::FairnessPolicy>(const std::string&)> fairness;
};

class Band {
 public:
  const BandConfig& config() const { return config_; }
  int priority() const { return config_.priority; }
  std::uint64_t requests() const { return requests_; }
  std::uint64_t bytes() const { return bytes_; }
  std::size_t backlogged_flows() const { return backlogged_; }
  bool backlogged() const { return backlogged_ > 0; }
  bool configured() const { return configured_; }  // false: made from the default template
  flowcontrol::FairnessPolicy& fairness() { return *fairness_; }
  const flowcontrol::OrderingPolicy& ordering() const { return *ordering_; }
  const FlowTable& flows() const { return flows_; }
  // Newest queued item of the band (arrival order), or null.
  Item* newest() const { return newest_; }

  double starvation_credit = 0;  // used by the controller's band selection

 private:
  friend class FlowRegistry;
  BandConfig config_;
  bool configured_ = false;
  std::unique_ptr<flowcontrol::OrderingPolicy> ordering_;
  std::unique_ptr<flowcontrol::FairnessPolicy> fairness_;
  FlowTable flows_;  // by flow id
  std::uint64_t requests_ = 0;
  std::uint64_t bytes_ = 0;
  std::size_t backlogged_ = 0;
  Item* oldest_ = nullptr;
  Item* newest_ = nullptr;
};

struct RegistryConfig {
  std::uint64_t max_bytes = 0;     // global; 0: unlimited
  std::uint64_t max_requests = 0;  // global; 0: unlimited
  // Live flows (id x priority) at most; 0: unlimited. Flow ids are chosen by
  // clients, so this bounds the registry's memory.
  std::uint64_t max_flows = 0;
  BandConfig default_band;  // template for priorities without a band
  // llm-d's defaultNegativePriorityBand: the template for negative ones.
  std::optional<BandConfig> default_negative_band;
  std::vector<BandConfig> bands;
  // The template a band of `priority` without its own config is made from.
  BandConfig template_for(int priority) const {
    BandConfig c = priority < 0 && default_negative_band ? *default_negative_band : default_band;
    c.priority = priority;
    return c;
  }
};

// Per-flow-id overrides an operator sets at runtime.
struct FlowOverride {
  std::optional<double> weight;
  std::optional<int> priority;              // pin: every request of the id goes here
  std::optional<std::uint64_t> max_queued;  // per-flow queue limit (requests)
};

// A copy of one flow's state, made on the dispatcher for other threads to
// render (the admin plane, /metrics).
struct FlowSummary {
  std::string id;
  int priority = 0;
  int band = 0;
  double weight = 1;
  std::size_t queued = 0;
  std::uint64_t bytes = 0;
  std::uint32_t in_flight = 0;
  TimePoint last_active{};
  FlowStats stats;
};

// Which limit a newcomer would exceed.
enum class Limit { kNone, kFlow, kBand, kGlobal };

class FlowRegistry {
 public:
  FlowRegistry(RegistryConfig config, PolicyFactory factory);
  ~FlowRegistry();

  // ---- items
  Item* allocate();
  void release(Item* item);
  // The item for a ticket, or null if the ticket is stale or unknown.
  Item* find(std::uint64_t ticket);
  // A ticket is never 0; it changes every time a slot is reused.
  static std::uint64_t ticket(const Item* item) {
    return (static_cast<std::uint64_t>(item->generation) << 32) | (item->index + 1ull);
  }

  // ---- classification
  // The flow key a request of `id` at `priority` lands in (a priority pin
  // overrides the requested priority).
  FlowKey resolve(const std::string& id, int priority) const;
  Band& band(int priority);  // made from the template if missing
  // The flow of `key`, made if missing. Ignores max_flows: for moves an
  // operator asked for, which never drop a request.
  Flow& flow(const FlowKey& key, TimePoint now);
  // The same, with the id's FlowTable::hash already computed.
  Flow& flow(const FlowKey& key, std::uint64_t hash, TimePoint now);
  // For a newcomer: the flow of `key`, made if missing. At max_flows the
  // flow idle the longest is dropped to make room; when no flow is idle
  // (every one has work queued or in flight), null: the newcomer is
  // refused and the flows already there keep their fairness state.
  // `hash` is FlowTable::hash(key.id) (computed by the caller, which may
  // have done it off this thread).
  Flow* admit_flow(const FlowKey& key, std::uint64_t hash, TimePoint now);
  Flow* admit_flow(const FlowKey& key, TimePoint now) {
    return admit_flow(key, FlowTable::hash(key.id), now);
  }
  // Starts loading what an enqueue into the flow (`priority`, `hash`)
  // reads, one stage at a time, each needing the one before in cache: 0 the
  // flow-table slot, 1 the flow, 2 its queue's tail. Only loads (see
  // Controller::for_each_prefetched).
  void prefetch_flow(int priority, std::uint64_t hash, int stage) const;
  // Starts loading what releasing the head of each of `flows` (in the
  // order given) reads and writes: the flow's queue, its head item, and
  // that item's neighbours in its flow and band lists, one stage at a time
  // for all of them, so that the misses of different flows overlap. Only
  // loads (see Controller::dispatch).
  void prefetch_releases(flowcontrol::FlowView* const* flows, std::size_t n) const;
  // Starts loading what releasing `item` writes besides itself: its
  // neighbours in its flow (the next head, whose key a policy reads) and
  // in its band. Only loads.
  static void prefetch_neighbours(const Item* item) {
    if (item->next) __builtin_prefetch(item->next, 1);
    if (item->band_prev) __builtin_prefetch(item->band_prev, 1);
    if (item->band_next) __builtin_prefetch(item->band_next, 1);
  }
  // Newcomers refused by admit_flow so far.
  std::uint64_t flow_limit_rejections() const { return flow_limit_rejections_; }

  // ---- capacity
  Limit would_exceed(const Flow& flow, std::uint64_t bytes) const;
  std::uint64_t total_requests() const { return requests_; }
  std::uint64_t total_bytes() const { return bytes_; }
  const RegistryConfig& config() const { return config_; }

  // ---- queue operations (keep counts and the fairness policy in step)
  void enqueue(Item* item, Flow& flow, TimePoint now);
  // Removes a queued item from its flow (dispatch, cancel, expiry, eviction).
  void dequeue(Item* item, TimePoint now);
  void mark_in_flight(Item* item, int endpoint);
  void finish_in_flight(Item* item, TimePoint now);

  // ---- iteration
  // Bands by descending priority.
  const std::map<int, std::unique_ptr<Band>, std::greater<int>>& bands() const { return bands_; }
  std::map<int, std::unique_ptr<Band>, std::greater<int>>& bands() { return bands_; }

  // ---- runtime updates (the admin plane's API). Queued items are never
  // dropped: a priority change moves them to their new band.
  void set_flow_override(const std::string& id, const FlowOverride& o, TimePoint now);
  void clear_flow_override(const std::string& id, TimePoint now);
  const std::unordered_map<std::string, FlowOverride>& overrides() const { return overrides_; }
  // The id is listed in the config's `flows:`.
  bool has_configured_weight(const std::string& id) const {
    return configured_weights_.count(id) > 0;
  }
  // Adds a band or changes an existing one (limits, policies, share).
  void set_band(const BandConfig& config, TimePoint now);
  // A configured band reverts to the default template (items stay).
  void remove_band(int priority, TimePoint now);
  // A reloaded config, as a whole: global limits, the default band (applied
  // to the bands made from it), configured bands (added, changed, or
  // reverted to the default when gone), configured weights (applied to
  // existing flows; operator overrides still win) and, when `factory` is
  // given, new policy prices (every band's fairness policy is rebuilt).
  // Queued items stay where they are.
  void apply(const RegistryConfig& config, const std::unordered_map<std::string, double>& weights,
             const PolicyFactory* factory, TimePoint now);

  // The deadlines of queued requests changed in place (a new TTL regime):
  // every queue whose band orders by something other than arrival, and
  // its fairness policy, sorts again. Their ordered sets would otherwise
  // hold items out of order, and a removal that searches by key could
  // miss its item and leave it queued after release. O(flows + queued x
  // log) in those bands, on that rare change of regime.
  void resort_ordered_bands();
  // Drops flows that have been empty and idle for `idle` (none in flight).
  // Costs O(flows dropped): idle flows are kept in a list by idle time.
  std::size_t collect_idle_flows(TimePoint now, Duration idle);

  std::size_t flow_count() const { return flow_count_; }

  // A copy of every flow, made a chunk at a time so that no single step
  // holds the dispatcher for long whatever the number of flows. Each flow
  // that lives through the whole copy is in it exactly once; flows made or
  // dropped meanwhile may or may not be. One copy at a time: beginning
  // another abandons the first.
  void begin_flow_copy();
  // Copies up to `n` more flows; when that completes the copy, moves it
  // into `out` and returns true.
  bool continue_flow_copy(std::size_t n, std::vector<FlowSummary>& out);
  // Ends a copy in progress and frees it (after a failure).
  void abandon_flow_copy() {
    copying_ = false;
    copy_ = {};
  }
  static FlowSummary summarize(const Flow& flow);

 private:
  std::unique_ptr<Band> make_band(const BandConfig& config, bool configured);
  void apply_band_config(Band& band, const BandConfig& config, bool rebuild_fairness = false);
  void move_flow_items(const std::string& id, TimePoint now);
  void link_band(Band& band, Item* item, bool newest);
  void unlink_band(Band& band, Item* item);
  double weight_for(const std::string& id) const;
  void remove_flow(Band& band, Flow& flow);
  // Keeps the idle list in step after `flow` changed (queue or in flight).
  void touch(Flow& flow, TimePoint now);
  void unlink_idle(Flow& flow);

  RegistryConfig config_;
  PolicyFactory factory_;
  std::map<int, std::unique_ptr<Band>, std::greater<int>> bands_;
  std::unordered_map<std::string, FlowOverride> overrides_;
  std::unordered_map<std::string, double> configured_weights_;
  std::uint64_t requests_ = 0;
  std::uint64_t bytes_ = 0;
  std::size_t flow_count_ = 0;
  std::vector<Flow*> all_flows_;  // every live flow, in no particular order
  bool copying_ = false;
  std::vector<FlowSummary> copy_;  // the copy in progress
  std::size_t copy_cursor_ = 0;    // all_flows_[0, cursor) copied
  std::size_t copy_end_ = 0;       // ... up to here
  std::uint64_t flow_limit_rejections_ = 0;
  std::uint64_t newest_sequence_ = 0;  // the largest request sequence enqueued
  Flow* idle_oldest_ = nullptr;
  Flow* idle_newest_ = nullptr;
  // Item pool: stable addresses in chunks of one huge page each (see
  // huge_pages.h); free slots on a stack.
  struct ChunkDeleter {
    void operator()(Item* chunk) const noexcept;
  };
  std::vector<std::unique_ptr<Item, ChunkDeleter>> chunks_;
  std::vector<std::uint32_t> free_items_;
  std::uint32_t capacity_ = 0;
  // Flow slots for policies' per-flow state.
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t next_slot_ = 0;

 public:
  // Configured per-flow weights (flows: section); overrides take precedence.
  void set_configured_weight(const std::string& id, double weight) {
    configured_weights_[id] = weight;
  }
};

}  // namespace sluice::registry
