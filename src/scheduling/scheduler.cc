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

std::string type_of(const std::vector<std::unique_ptr<Plugin>>& plugins, const std::string& name) {
  for (const auto& p : plugins)
    if (p->name() == name) return std::string(p->type());
  return "unknown";
}

}  // namespace

void Timing::record(std::chrono::nanoseconds d) {
  const double s = std::chrono::duration<double>(d).count();
  std::size_t i = 0;
  while (i < kBounds.size() && s > kBounds[i]) ++i;
  buckets[i].fetch_add(1, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
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
    if (auto* l = dynamic_cast<RequestLifecycle*>(p.get())) {
      lifecycle_.push_back(l);
      lifecycle_timings_.push_back(timing_for("RequestLifecycle", p->name()));
    }
  }
  for (const auto& prof : profiles_) {
    ProfileTimings t;
    for (const auto& f : prof.filters) t.filters.push_back(timing_for("Filter", f.second));
    for (const auto& s : prof.scorers) t.scorers.push_back(timing_for("Scorer", s.name));
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
  out.scored.clear();

  candidates_.assign(all_.begin(), all_.end());
  for (std::size_t i = 0; i < profile.filters.size(); ++i) {
    {
      Timed t(timing.filters[i]);
      profile.filters[i].first->filter(cycle, request, candidates_);
    }
    if (candidates_.empty()) {
      out.error = "filter '" + profile.filters[i].second + "' left no endpoint";
      return;
    }
  }
  const std::size_t n = candidates_.size();
  totals_.assign(n, 0.0);
  if (scores_.size() < n) scores_.resize(n);
  double weight_sum = 0;
  for (std::size_t s = 0; s < profile.scorers.size(); ++s) {
    const auto& ws = profile.scorers[s];
    std::span<double> scores(scores_.data(), n);
    std::fill(scores.begin(), scores.end(), 0.0);
    {
      Timed t(timing.scorers[s]);
      ws.scorer->score(cycle, request, candidates_, scores);
    }
    for (std::size_t i = 0; i < n; ++i) {
      double v = scores[i];
      if (!(v >= 0)) v = 0;  // NaN and negatives
      if (v > 1) v = 1;
      totals_[i] += ws.weight * v;
    }
    weight_sum += ws.weight;
  }
  out.scored.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    out.scored[i] = ScoredEndpoint{candidates_[i], weight_sum > 0 ? totals_[i] / weight_sum : 0.0};
  // The picker may reorder its view; keep `scored` in candidate order for
  // handlers by picking from a copy held in totals'-sized scratch.
  {
    Timed t(timing.picker);
    pick_scratch_.assign(out.scored.begin(), out.scored.end());
    profile.picker->pick(cycle, request, pick_scratch_, out.targets);
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

  all_.clear();
  for (const auto& e : endpoints)
    if (!options_.require_room || e.has_room) all_.push_back(&e);
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

void Scheduler::dispatched(CycleState& cycle, const Request& request, SchedulingResult& result) {
  for (std::size_t i = 0; i < lifecycle_.size(); ++i) {
    Timed t(lifecycle_timings_[i]);
    lifecycle_[i]->pre_request(cycle, request, result);
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
