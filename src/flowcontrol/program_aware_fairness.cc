#include "flowcontrol/program_aware_fairness.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice::flowcontrol {

namespace {

// llm-d: output tokens weigh twice as much as input tokens.
constexpr double kInputWeight = 1;
constexpr double kOutputWeight = 2;

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

Duration from_seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// llm-d's rangeNormalize: 0.5 when every value is the same.
double normalize(double v, double lo, double hi) { return hi == lo ? 0.5 : (v - lo) / (hi - lo); }

}  // namespace

ProgramAwareFairness::ProgramAwareFairness(ProgramAwareParams params, ClockFn clock)
    : params_(params), clock_(std::move(clock)) {}

double ProgramAwareFairness::decayed(const Program& p, TimePoint now) const {
  if (params_.half_life_seconds <= 0 || now <= p.anchor) return p.service;
  return p.service * std::exp2(-seconds(now - p.anchor) / params_.half_life_seconds);
}

void ProgramAwareFairness::add_service(Program& p, double cost, TimePoint now) {
  p.service = decayed(p, now) + cost;
  p.anchor = std::max(p.anchor, now);
}

ProgramAwareFairness::SlotState& ProgramAwareFairness::slot_state(const FlowView& flow) {
  if (flow.slot() >= slots_.size()) slots_.resize(flow.slot() + 1);
  auto& s = slots_[flow.slot()];
  s.flow = const_cast<FlowView*>(&flow);
  return s;
}

void ProgramAwareFairness::erase(std::unordered_map<std::string, Program>::iterator it) {
  if (it->second.slot != kNone && it->second.slot < slots_.size())
    slots_[it->second.slot].program = nullptr;
  programs_.erase(it);
}

// llm-d's sweep: a program with nothing in flight and no completion within
// the TTL goes. sluice keeps the ones with queued work (their flow is
// backlogged), whose state the next pick would recreate anyway.
void ProgramAwareFairness::sweep(TimePoint now) {
  const Duration ttl = from_seconds(params_.eviction_ttl_seconds);
  for (auto it = programs_.begin(); it != programs_.end();) {
    const Program& p = it->second;
    auto next = std::next(it);
    if (!p.backlogged && p.in_flight == 0 && now - p.last_completion > ttl) erase(it);
    it = next;
  }
}

// At maxPrograms: the program idle longest (no queued work, nothing in
// flight) makes room; false when there is none.
bool ProgramAwareFairness::make_room(TimePoint now) {
  if (params_.eviction_ttl_seconds > 0) sweep(now);
  if (programs_.size() < params_.max_programs) return true;
  auto victim = programs_.end();
  for (auto it = programs_.begin(); it != programs_.end(); ++it) {
    const Program& p = it->second;
    if (p.backlogged || p.in_flight > 0) continue;
    if (victim == programs_.end() || p.last_completion < victim->second.last_completion)
      victim = it;
  }
  if (victim == programs_.end()) return false;
  erase(victim);
  return true;
}

ProgramAwareFairness::Program* ProgramAwareFairness::program_for(const FlowView& flow,
                                                                 TimePoint now) {
  auto& s = slot_state(flow);
  if (s.program) return s.program;
  auto it = programs_.find(flow.key().id);
  if (it == programs_.end()) {
    if (programs_.size() >= params_.max_programs && !make_room(now)) return nullptr;
    Program fresh;
    // llm-d seeds the last completion so that a program that never
    // completes still becomes evictable.
    fresh.last_completion = now;
    fresh.anchor = now;
    it = programs_.emplace(flow.key().id, fresh).first;
  }
  it->second.slot = flow.slot();
  s.program = &it->second;
  return s.program;
}

void ProgramAwareFairness::on_backlogged(FlowView& flow) {
  auto& s = slot_state(flow);
  if (s.active_pos != kNone) return;
  if (Program* p = program_for(flow, clock_())) p->backlogged = true;
  s.active_pos = static_cast<std::uint32_t>(active_.size());
  active_.push_back(flow.slot());
}

void ProgramAwareFairness::on_idle(FlowView& flow) {
  auto& s = slot_state(flow);
  if (s.active_pos == kNone) return;
  const std::uint32_t moved = active_.back();
  active_[s.active_pos] = moved;
  slots_[moved].active_pos = s.active_pos;
  active_.pop_back();
  s.active_pos = kNone;
  if (s.program) s.program->backlogged = false;
}

void ProgramAwareFairness::on_removed(FlowView& flow) {
  on_idle(flow);
  auto& s = slot_state(flow);
  if (s.program) s.program->slot = kNone;
  s = SlotState{};
}

FlowView* ProgramAwareFairness::pick() {
  if (active_.empty()) return nullptr;
  const TimePoint now = clock_();
  if (params_.eviction_ttl_seconds > 0) {
    if (!next_sweep_) next_sweep_ = now + from_seconds(params_.eviction_sweep_seconds);
    if (now >= *next_sweep_) {
      sweep(now);
      next_sweep_ = now + from_seconds(params_.eviction_sweep_seconds);
    }
  }
  scratch_.resize(active_.size());
  double lo_s = 0, hi_s = 0;
  TimePoint lo_e{}, hi_e{};
  for (std::size_t i = 0; i < active_.size(); ++i) {
    const SlotState& s = slots_[active_[i]];
    const QueuedRequest* head = s.flow->head();
    Candidate c{s.program ? decayed(*s.program, now) : 0.0, head ? head->enqueued : now,
                head ? head->sequence : UINT64_MAX};
    scratch_[i] = c;
    lo_s = i == 0 ? c.service : std::min(lo_s, c.service);
    hi_s = i == 0 ? c.service : std::max(hi_s, c.service);
    lo_e = i == 0 ? c.enqueued : std::min(lo_e, c.enqueued);
    hi_e = i == 0 ? c.enqueued : std::max(hi_e, c.enqueued);
  }
  // The head wait, now - enqueued, normalised: (hi_e - enqueued) / (hi_e - lo_e).
  const double span_e = seconds(hi_e - lo_e);
  std::size_t best = 0;
  double best_score = -1;
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    const Candidate& c = scratch_[i];
    const double wait = span_e == 0 ? 0.5 : seconds(hi_e - c.enqueued) / span_e;
    const double score = params_.weight_service * (1 - normalize(c.service, lo_s, hi_s)) +
                         params_.weight_head_wait * wait;
    const Candidate& b = scratch_[best];
    if (i == 0 || score > best_score ||
        (score == best_score &&
         (c.enqueued < b.enqueued || (c.enqueued == b.enqueued && c.sequence < b.sequence)))) {
      best = i;
      best_score = score;
    }
  }
  return slots_[active_[best]].flow;
}

void ProgramAwareFairness::on_dispatched(FlowView& flow, const QueuedRequest& request) {
  const TimePoint now = clock_();
  Program* p = program_for(flow, now);
  if (!p) return;
  const double wait_ms =
      std::max(0.0, std::chrono::duration<double, std::milli>(now - request.enqueued).count());
  p->wait_ms_sum += wait_ms;
  p->waits += 1;
  p->in_flight += 1;
  add_service(*p, kInputWeight * static_cast<double>(request.input_tokens), now);
}

void ProgramAwareFairness::on_output_tokens(FlowView& flow, std::uint64_t tokens) {
  const TimePoint now = clock_();
  if (Program* p = program_for(flow, now))
    add_service(*p, kOutputWeight * static_cast<double>(tokens), now);
}

void ProgramAwareFairness::on_completed(FlowView& flow) {
  const TimePoint now = clock_();
  Program* p = program_for(flow, now);
  if (!p) return;
  if (p->in_flight > 0) p->in_flight -= 1;
  p->last_completion = now;
}

double ProgramAwareFairness::attained_service(const std::string& id) const {
  auto it = programs_.find(id);
  return it == programs_.end() ? 0.0 : decayed(it->second, clock_());
}

std::vector<ProgramAwareFairness::ProgramStats> ProgramAwareFairness::stats() const {
  const TimePoint now = clock_();
  std::vector<ProgramStats> out;
  out.reserve(programs_.size());
  for (const auto& [id, p] : programs_)
    out.push_back(ProgramStats{id, decayed(p, now),
                               p.waits ? p.wait_ms_sum / static_cast<double>(p.waits) : 0.0,
                               p.waits, p.in_flight});
  return out;
}

double ProgramAwareFairness::jains_fairness_index() const {
  double sum = 0, sum_sq = 0, n = 0;
  for (const auto& [id, p] : programs_) {
    if (p.waits == 0) continue;
    const double x = p.wait_ms_sum / static_cast<double>(p.waits);
    sum += x;
    sum_sq += x * x;
    n += 1;
  }
  if (n <= 1 || sum_sq == 0) return 1.0;
  return sum * sum / (n * sum_sq);
}

}  // namespace sluice::flowcontrol
