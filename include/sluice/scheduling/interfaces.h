// The scheduler's extension points (GIE's scheduling framework):
//
//   Filter          drops candidate endpoints
//   Scorer          scores each candidate in [0, 1] (clamped by the profile)
//   Picker          chooses the target(s) from the weighted scores
//   ProfileHandler  decides which profiles run, then merges their results
//   RequestLifecycle  acts after dispatch and after the response
//
// A profile is a struct: filters, weighted scorers, exactly one picker. All
// calls happen on the dispatcher thread, one request at a time; plugins
// must not block, must not throw, and must not keep pointers to endpoints
// beyond the call (the snapshot changes between cycles).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/scheduling/cycle_state.h"
#include "sluice/scheduling/endpoint.h"
#include "sluice/scheduling/request.h"

namespace sluice::scheduling {

class Filter {
 public:
  virtual ~Filter() = default;
  // Removes from `candidates` the endpoints that must not serve `request`.
  // Leaving none ends the profile with an error.
  virtual void filter(CycleState& cycle, const Request& request,
                      std::vector<const Endpoint*>& candidates) = 0;
};

// The candidates' fields the load scorers read, as contiguous columns
// index-aligned with the candidates of a call. The scheduler builds them in
// the one pass that picks the endpoints with room, so a scorer reads a few
// KB in a row instead of one cache line of every endpoint record (at 512
// endpoints each such pass cost a microsecond and a half from L2).
struct CandidateColumns {
  // The columns, a bit each (Scorer::columns_read).
  enum : std::uint32_t {
    kSlot = 1u << 0,
    kQueue = 1u << 1,
    kRunning = 1u << 2,
    kKvUsage = 1u << 3,
    kInFlight = 1u << 4,
    kAll = (1u << 5) - 1,
  };
  std::vector<std::uint32_t> slot;  // Endpoint::index
  std::vector<double> queue;        // metrics.waiting_queue_size + dispatched_since_scrape
  std::vector<double> running;      // metrics.running_requests_size
  std::vector<double> kv_usage;     // metrics.kv_cache_usage
  std::vector<double> in_flight;    // in_flight

  std::size_t size() const { return slot.size(); }
  // Sized for `n` candidates (storage kept from the last cycle), then
  // filled through writer().
  void resize(std::size_t n) {
    slot.resize(n);
    queue.resize(n);
    running.resize(n);
    kv_usage.resize(n);
    in_flight.resize(n);
  }
  // Writes row `i` from an endpoint record: the one place the columns are
  // derived. It holds the columns' data pointers (valid until the next
  // resize), so a loop that writes rows keeps them in registers — through
  // the vectors the compiler reloads them per row, for fear a store aliases
  // them (8% of a 512-endpoint cycle). Only the columns in `which` are
  // written (the rest keep whatever they held): the scheduler asks for
  // those its scorers read, as the stores were most of that pass.
  struct Writer {
    std::uint32_t* slot;
    double* queue;
    double* running;
    double* kv_usage;
    double* in_flight;
    std::uint32_t which;
    void operator()(std::size_t i, const Endpoint& e) const {
      if (which & kSlot) slot[i] = e.index;
      // What queue-scorer ranks: waiting on the server plus sent since its scrape.
      if (which & kQueue)
        queue[i] = e.metrics.waiting_queue_size + static_cast<double>(e.dispatched_since_scrape);
      if (which & kRunning) running[i] = e.metrics.running_requests_size;
      if (which & kKvUsage) kv_usage[i] = e.metrics.kv_cache_usage;
      if (which & kInFlight) in_flight[i] = static_cast<double>(e.in_flight);
    }
  };
  Writer writer(std::uint32_t which = kAll) {
    return {slot.data(), queue.data(), running.data(), kv_usage.data(), in_flight.data(), which};
  }
  void assign(std::span<const Endpoint* const> candidates, std::uint32_t which = kAll) {
    resize(candidates.size());
    const Writer write = writer(which);
    for (std::size_t i = 0; i < candidates.size(); ++i) write(i, *candidates[i]);
  }
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Writes one score per candidate into `scores` (same order), 0 = worst,
  // 1 = best. `scores` is preallocated: no allocation per endpoint.
  virtual void score(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, std::span<double> scores) = 0;
  // The columns score_columns reads (CandidateColumns::kSlot | ...): the
  // scheduler fills only those some scorer of its profiles reads. Asked
  // once, when the scheduler is built: the answer must not change. The
  // default, every column, is right for any scorer.
  virtual std::uint32_t columns_read() const { return CandidateColumns::kAll; }
  // The same, with the candidates' columns at hand (what the scheduler
  // calls). A scorer that reads only those fields overrides this one (and
  // says which in columns_read); the default ignores them.
  virtual void score_columns(CycleState& cycle, const Request& request,
                             std::span<const Endpoint* const> candidates,
                             const CandidateColumns& columns, std::span<double> scores) {
    score(cycle, request, candidates, scores);
  }
};

// A scorer written against the columns: called alone (tests, other
// plugins), it builds them from the candidates first.
class ColumnScorer : public Scorer {
 public:
  void score(CycleState& cycle, const Request& request, std::span<const Endpoint* const> candidates,
             std::span<double> scores) final {
    own_.assign(candidates);
    score_columns(cycle, request, candidates, own_, scores);
  }
  void score_columns(CycleState& cycle, const Request& request,
                     std::span<const Endpoint* const> candidates, const CandidateColumns& columns,
                     std::span<double> scores) override = 0;

 private:
  CandidateColumns own_;
};

struct ScoredEndpoint {
  const Endpoint* endpoint = nullptr;
  double score = 0;  // the profile's weighted sum
};

class Picker {
 public:
  virtual ~Picker() = default;
  // Appends the chosen endpoints to `targets`, best first (the first is
  // the primary, the rest fallbacks). May reorder `scored`.
  virtual void pick(CycleState& cycle, const Request& request, std::span<ScoredEndpoint> scored,
                    std::vector<const Endpoint*>& targets) = 0;
  // False if this picker never writes to `scored`: the scheduler then hands
  // it the profile's result list itself instead of a copy.
  virtual bool reorders_scored() const { return true; }
};

struct WeightedScorer {
  Scorer* scorer = nullptr;
  double weight = 1;
  std::string name;  // the plugin instance, for timing and messages
};

struct Profile {
  std::string name;
  std::vector<std::pair<Filter*, std::string>> filters;  // plugin, instance name
  std::vector<WeightedScorer> scorers;
  Picker* picker = nullptr;
  std::string picker_name;
};

// The outcome of running one profile.
struct ProfileResult {
  const Profile* profile = nullptr;
  bool ok = false;
  std::string error;  // why no endpoint (a filter left none)
  std::vector<const Endpoint*> targets;
  // Every candidate that passed the filters with its weighted score,
  // normalized to [0, 1] by the profile's total weight. Handlers that pair
  // endpoints across profiles (P/D) look beyond the picked targets.
  std::vector<ScoredEndpoint> scored;
};

struct SchedulingResult {
  bool ok = false;
  std::string error;
  std::string primary_profile;
  // The endpoint to send the request to first, then fallbacks.
  std::vector<const Endpoint*> targets;
  // Every endpoint that takes part in serving the request (the primary
  // target of each profile that ran: decode and, in P/D, prefill).
  std::vector<const Endpoint*> serving;
  // Request headers to add when forwarding (e.g. x-prefiller-host-port).
  std::vector<std::pair<std::string, std::string>> headers;
  // Response headers to add towards the client (e.g. x-session-token).
  std::vector<std::pair<std::string, std::string>> response_headers;
  // Data parallelism (data-parallel-profile-handler): the request goes to
  // the target's host on this port instead of the endpoint's own (0: its
  // own), while the target stays the endpoint it is accounted to (in
  // flight, load, metrics, prefix state).
  std::uint16_t upstream_port = 0;
  // Not empty: the proxy adds "<rank_header>: <host:port>" naming the
  // endpoint it actually sends to (IPv6 bracketed), written per attempt so
  // that a fallback names its own rank. Static storage (a constant).
  std::string_view rank_header;
};

class ProfileHandler {
 public:
  virtual ~ProfileHandler() = default;
  // Called repeatedly with the results so far; appends to `next` the
  // profiles to run now. Appending none ends the cycle.
  virtual void pick(CycleState& cycle, const Request& request, std::span<const Profile> profiles,
                    std::span<const ProfileResult> results, std::vector<const Profile*>& next) = 0;
  // Turns all profile results into one answer.
  virtual SchedulingResult process_results(CycleState& cycle, const Request& request,
                                           std::span<const ProfileResult> results) = 0;
};

// The endpoints of the running cycle as the scheduler was given them (one
// array), and a number that changes whenever that array moves or resizes
// or any of its endpoints' labels change (Endpoint::labels_version). A
// plugin that derives something from labels keeps it by an endpoint's
// position in the array and derives again only when the number changes:
// it then reads neither the endpoint's record nor its labels per cycle.
struct PoolView {
  const Endpoint* base = nullptr;
  std::size_t size = 0;
  std::uint64_t labels_epoch = 0;
  // The endpoint's position, or size when it is not one of the array's.
  std::size_t position(const Endpoint* e) const {
    const auto p = reinterpret_cast<std::uintptr_t>(e);
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    if (p < b || p >= b + size * sizeof(Endpoint)) return size;
    return static_cast<std::size_t>(e - base);
  }
};

// A plugin that reads labels: the scheduler that holds it hands it its
// view once, when built (valid while the scheduler lives), and keeps the
// view current before each cycle. Called alone (tests), a plugin has none.
class PoolViewer {
 public:
  virtual ~PoolViewer() = default;
  virtual void attach(const PoolView* view) = 0;
};

class RequestLifecycle {
 public:
  virtual ~RequestLifecycle() = default;
  // The request was dispatched with `result` (e.g. record the prefix blocks
  // as now cached on the chosen endpoint). May add headers to `result`.
  virtual void pre_request(CycleState& cycle, const Request& request, SchedulingResult& result) {}
  // The first bytes of the response body arrived (llm-d's StartOfStream):
  // prefill is done. At most once per request, before response_complete; a
  // response that ends before any body byte never gets it.
  virtual void response_started(CycleState& cycle, const Request& request) {}
  // Whether response_started does anything: the first-byte event crosses
  // to the dispatcher only for a request whose scheduler has such a plugin.
  virtual bool wants_response_started() const { return false; }
  // The response ended (any way) on endpoint slot `endpoint_index`.
  virtual void response_complete(CycleState& cycle, const Request& request,
                                 std::uint32_t endpoint_index, std::uint64_t output_tokens) {}
};

}  // namespace sluice::scheduling
