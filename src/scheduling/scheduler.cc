#include "scheduling/scheduler.h"

#include <algorithm>
#include <cmath>

namespace sluice::scheduling {

namespace {
using SteadyClock = std::chrono::steady_clock;

// Times one plugin call into `t`.
class Timed {
 public:
  explicit Timed(Timing* t) : t_(t), start_(SteadyClock::now()) {}
  ~Timed() { t_->record(SteadyClock::now() - start_); }

 private:
  Timing* t_;
  SteadyClock::time_point start_;
};

// total[i] = (first ? 0 : total[i]) + w * row[i] clamped into [0, 1] (NaN
// to 0), in the select form x86's max/min take, so the loop vectorizes (no
// branch per endpoint).
inline void add_weighted_loop(const double* row, double w, bool first, double* total,
                              std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    double v = row[i] > 0 ? row[i] : 0.0;
    v = v < 1 ? v : 1.0;
    total[i] = (first ? 0.0 : total[i]) + w * v;
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The same loop compiled for AVX2 (four doubles a step instead of two),
// taken when the CPU has it. No FMA: a fused multiply-add rounds once,
// and the totals (and so the picks and their tie-breaks) must not depend
// on the machine.
__attribute__((target("avx2"))) void add_weighted_avx2(const double* row, double w, bool first,
                                                       double* total, std::size_t n) {
  add_weighted_loop(row, w, first, total, n);
}
#define SLUICE_HAVE_AVX2_BUILD 1
#endif

void add_weighted_generic(const double* row, double w, bool first, double* total, std::size_t n) {
  add_weighted_loop(row, w, first, total, n);
}

void add_weighted(const double* row, double w, bool first, double* total, std::size_t n) {
#ifdef SLUICE_HAVE_AVX2_BUILD
  if (detail::cpu_has_avx2()) return add_weighted_avx2(row, w, first, total, n);
#endif
  add_weighted_generic(row, w, first, total, n);
}

std::string type_of(const std::vector<std::unique_ptr<Plugin>>& plugins, const std::string& name) {
  for (const auto& p : plugins)
    if (p->name() == name) return std::string(p->type());
  return "unknown";
}

}  // namespace

namespace detail {
bool cpu_has_avx2() {
#ifdef SLUICE_HAVE_AVX2_BUILD
  static const bool avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  return avx2;
#else
  return false;
#endif
}
void add_weighted_for_test(bool avx2, const double* row, double w, bool first, double* total,
                           std::size_t n) {
#ifdef SLUICE_HAVE_AVX2_BUILD
  if (avx2) return add_weighted_avx2(row, w, first, total, n);
#endif
  add_weighted_generic(row, w, first, total, n);
}
}  // namespace detail

void Timing::record(std::chrono::nanoseconds d) {
  // One writer (the dispatcher): plain stores, no locked read-modify-write;
  // readers (metrics) load.
  const double s = std::chrono::duration<double>(d).count();
  std::size_t i = 0;
  while (i < kBounds.size() && s > kBounds[i]) ++i;
  const auto bump = [](std::atomic<std::uint64_t>& a, std::uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  };
  bump(buckets[i], 1);
  bump(count, 1);
  bump(sum_ns, static_cast<std::uint64_t>(d.count()));
}

Scheduler::Scheduler(std::vector<std::unique_ptr<Plugin>> plugins, std::vector<Profile> profiles,
                     ProfileHandler* handler, std::string handler_name, RequestPreparation prep,
                     Options options)
    : plugins_(std::move(plugins)),
      profiles_(std::move(profiles)),
      handler_(handler),
      prep_(prep),
      options_(options) {
  for (const auto& p : plugins_) {
    if (auto* v = dynamic_cast<PoolViewer*>(p.get())) {
      v->attach(&pool_view_);
      viewers_ = true;
    }
    if (auto* l = dynamic_cast<RequestLifecycle*>(p.get())) {
      lifecycle_.push_back(l);
      wants_started_ = wants_started_ || l->wants_response_started();
      lifecycle_timings_.push_back(timing_for("RequestLifecycle", p->name()));
    }
  }
  for (const auto& prof : profiles_) {
    ProfileTimings t;
    for (const auto& f : prof.filters) t.filters.push_back(timing_for("Filter", f.second));
    for (const auto& s : prof.scorers) {
      t.scorers.push_back(timing_for("Scorer", s.name));
      columns_read_ |= s.scorer->columns_read();
    }
    t.picker = timing_for("Picker", prof.picker_name);
    profile_timings_.push_back(std::move(t));
  }
  handler_timing_ = timing_for("ProfileHandler", handler_name);
  timings_.push_back(std::make_unique<Timing>());
  timings_.back()->extension_point = "Cycle";
  timings_.back()->type = "scheduler";
  timings_.back()->name = "scheduler";
}

Scheduler::~Scheduler() = default;

Timing* Scheduler::timing_for(const std::string& point, const std::string& name) {
  for (auto& t : timings_)
    if (t->extension_point == point && t->name == name) return t.get();
  timings_.push_back(std::make_unique<Timing>());
  auto* t = timings_.back().get();
  t->extension_point = point;
  t->name = name;
  t->type = type_of(plugins_, name);
  return t;
}

const Plugin* Scheduler::plugin(std::string_view name) const {
  for (const auto& p : plugins_)
    if (p->name() == name) return p.get();
  return nullptr;
}

void Scheduler::run_profile(const Profile& profile, CycleState& cycle, const Request& request,
                            ProfileResult& out) {
  const auto& timing = profile_timings_[static_cast<std::size_t>(&profile - profiles_.data())];
  out.profile = &profile;
  out.ok = false;
  out.error.clear();
  out.targets.clear();
  // `scored` is cleared where the profile ends without one, and otherwise
  // resized in place below (no clearing and zeroing pass first).

  // Without filters the profile scores every endpoint with room as it is
  // (no copy of the list: at 512 endpoints the copies were a quarter of the
  // cycle).
  std::span<const Endpoint* const> candidates(all_);
  const CandidateColumns* columns = &all_columns_;
  if (!profile.filters.empty()) {
    candidates_.assign(all_.begin(), all_.end());
    for (std::size_t i = 0; i < profile.filters.size(); ++i) {
      {
        Timed t(timing.filters[i]);
        profile.filters[i].first->filter(cycle, request, candidates_);
      }
      if (candidates_.empty()) {
        out.scored.clear();
        out.error = "filter '" + profile.filters[i].second + "' left no endpoint";
        return;
      }
    }
    candidates = candidates_;
    candidate_columns_.assign(candidates, columns_read_);
    columns = &candidate_columns_;
  }
  const std::size_t n = candidates.size();
  const std::size_t ns = profile.scorers.size();
  // Each scorer into its own row, back to back (one clock read between two
  // scorers), then one pass that clamps, weighs and sums the rows.
  if (scores_.size() < n * ns) scores_.resize(n * ns);
  double weight_sum = 0;
  if (ns > 0) {
    auto lap = SteadyClock::now();
    for (std::size_t s = 0; s < ns; ++s) {
      std::span<double> row(scores_.data() + s * n, n);
      std::fill(row.begin(), row.end(), 0.0);
      profile.scorers[s].scorer->score_columns(cycle, request, candidates, *columns, row);
      const auto now = SteadyClock::now();
      timing.scorers[s]->record(now - lap);
      lap = now;
      weight_sum += profile.scorers[s].weight;
    }
  }
  // Weights normalized up front, so the sum needs no dividing pass; the
  // first row is assigned, the others added (no zeroing pass either).
  totals_.resize(n);
  if (ns == 0 || !(weight_sum > 0)) std::fill(totals_.begin(), totals_.end(), 0.0);
  for (std::size_t s = 0; s < ns && weight_sum > 0; ++s)
    add_weighted(scores_.data() + s * n, profile.scorers[s].weight / weight_sum, s == 0,
                 totals_.data(), n);
  out.scored.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.scored[i] = ScoredEndpoint{candidates[i], totals_[i]};
  // A picker that may reorder its view picks from a copy, so `scored` stays
  // in candidate order for handlers.
  {
    Timed t(timing.picker);
    if (profile.picker->reorders_scored()) {
      pick_scratch_.assign(out.scored.begin(), out.scored.end());
      profile.picker->pick(cycle, request, pick_scratch_, out.targets);
    } else {
      profile.picker->pick(cycle, request, out.scored, out.targets);
    }
  }
  if (out.targets.empty()) {
    out.error = "picker '" + profile.picker_name + "' chose no endpoint";
    return;
  }
  out.ok = true;
}

void Scheduler::schedule(CycleState& cycle, const Request& request,
                         std::span<const Endpoint> endpoints, SchedulingResult& result) {
  Timed whole(timings_.back().get());
  result.ok = false;
  result.error.clear();
  result.primary_profile.clear();
  result.targets.clear();
  result.headers.clear();
  result.response_headers.clear();
  result.serving.clear();

  // One pass over the endpoint records: those with room, and their hot
  // fields as columns for the scorers.
  all_.resize(endpoints.size());
  all_columns_.resize(endpoints.size());
  std::size_t with_room = 0;
  {
    const Endpoint** all = all_.data();  // a local, as the writer's pointers
    const CandidateColumns::Writer write = all_columns_.writer(columns_read_);
    const bool require_room = options_.require_room;
    // With label readers, the same pass notes whether any endpoint's labels
    // changed since the last cycle (its record's line is read here anyway).
    std::uint64_t changed = 0;
    if (!viewers_) {
      for (const auto& e : endpoints) {
        if (require_room && !e.has_room) continue;
        all[with_room] = &e;
        write(with_room, e);
        ++with_room;
      }
    } else {
      if (seen_versions_.size() != endpoints.size()) seen_versions_.assign(endpoints.size(), 0);
      const std::uint64_t* seen = seen_versions_.data();
      for (std::size_t i = 0; i < endpoints.size(); ++i) {
        const Endpoint& e = endpoints[i];
        changed |= seen[i] ^ e.labels_version;
        if (require_room && !e.has_room) continue;
        all[with_room] = &e;
        write(with_room, e);
        ++with_room;
      }
      watch_labels(endpoints, changed != 0);
    }
  }
  all_.resize(with_room);
  all_columns_.resize(with_room);
  if (all_.empty()) {
    result.error = endpoints.empty() ? "no endpoints" : "no endpoint has room";
    return;
  }

  results_used_ = 0;
  for (std::size_t round = 0; round < profiles_.size() + 1; ++round) {
    next_.clear();
    {
      Timed t(handler_timing_);
      handler_->pick(cycle, request, profiles_,
                     std::span<const ProfileResult>(results_.data(), results_used_), next_);
    }
    if (next_.empty()) break;
    for (const Profile* p : next_) {
      if (results_used_ == results_.size()) results_.emplace_back();
      run_profile(*p, cycle, request, results_[results_used_++]);
    }
  }
  {
    Timed t(handler_timing_);
    result = handler_->process_results(
        cycle, request, std::span<const ProfileResult>(results_.data(), results_used_));
  }
  if (result.ok && result.targets.empty()) {
    result.ok = false;
    result.error = "no target endpoint";
  }
}

void Scheduler::watch_labels(std::span<const Endpoint> endpoints, bool versions_changed) {
  if (versions_changed)
    for (std::size_t i = 0; i < endpoints.size(); ++i)
      seen_versions_[i] = endpoints[i].labels_version;
  if (versions_changed || endpoints.data() != pool_view_.base ||
      endpoints.size() != pool_view_.size) {
    pool_view_.base = endpoints.data();
    pool_view_.size = endpoints.size();
    ++pool_view_.labels_epoch;  // every label reader derives again
  }
}

void Scheduler::dispatched(CycleState& cycle, const Request& request, SchedulingResult& result) {
  for (std::size_t i = 0; i < lifecycle_.size(); ++i) {
    Timed t(lifecycle_timings_[i]);
    lifecycle_[i]->pre_request(cycle, request, result);
  }
}

void Scheduler::started(CycleState& cycle, const Request& request) {
  for (std::size_t i = 0; i < lifecycle_.size(); ++i) {
    Timed t(lifecycle_timings_[i]);
    lifecycle_[i]->response_started(cycle, request);
  }
}

void Scheduler::completed(CycleState& cycle, const Request& request, std::uint32_t endpoint_index,
                          std::uint64_t output_tokens) {
  for (std::size_t i = 0; i < lifecycle_.size(); ++i) {
    Timed t(lifecycle_timings_[i]);
    lifecycle_[i]->response_complete(cycle, request, endpoint_index, output_tokens);
  }
}

}  // namespace sluice::scheduling
