#include "admin/program_aware_metrics.h"

#include <algorithm>
#include <unordered_map>

#include "flowcontrol/program_aware_fairness.h"

namespace sluice::admin {

void copy_program_aware(flowcontrol::Controller& c, ProgramAwareCopy& out) {
  std::unordered_map<std::string, std::size_t> at;
  for (auto& [priority, band] : c.registry().bands()) {
    auto* p = dynamic_cast<flowcontrol::ProgramAwareFairness*>(&band->fairness());
    if (!p) continue;
    out.present = true;
    for (auto& s : p->stats()) {
      auto [it, fresh] = at.emplace(s.id, out.programs.size());
      if (fresh) out.programs.push_back(ProgramAwareCopy::Program{s.id, 0, 0, 0});
      auto& row = out.programs[it->second];
      row.attained_service += s.attained_service;
      row.wait_ms_sum += s.avg_wait_ms * static_cast<double>(s.waits);
      row.waits += static_cast<double>(s.waits);
    }
  }
}

void render_program_aware(observe::MetricsText& m, const ProgramAwareCopy& c,
                          std::size_t max_series) {
  if (!c.present) return;
  // Jain's index over every program's mean wait (llm-d's: programs with at
  // least one dispatched request; 1 with fewer than two).
  double sum = 0, sum_sq = 0, n = 0;
  for (const auto& p : c.programs) {
    if (p.waits == 0) continue;
    const double x = p.wait_ms_sum / p.waits;
    sum += x;
    sum_sq += x * x;
    n += 1;
  }
  m.family("llm_d_epp_program_aware_jains_fairness_index", "gauge",
           "Jain's Fairness Index over the average wait time per program (1: equal waits).");
  m.sample("llm_d_epp_program_aware_jains_fairness_index", {},
           n <= 1 || sum_sq == 0 ? 1.0 : sum * sum / (n * sum_sq));
  std::vector<const ProgramAwareCopy::Program*> rows;
  rows.reserve(c.programs.size());
  for (const auto& p : c.programs) rows.push_back(&p);
  const std::size_t keep = std::min(rows.size(), max_series);
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(),
                    [](const auto* a, const auto* b) {
                      return a->attained_service != b->attained_service
                                 ? a->attained_service > b->attained_service
                                 : a->id < b->id;
                    });
  rows.resize(keep);
  m.family("llm_d_epp_program_aware_avg_wait_time_milliseconds", "gauge",
           "Mean flow-control queue wait time per program.");
  for (const auto* p : rows)
    m.sample("llm_d_epp_program_aware_avg_wait_time_milliseconds", {{"program_id", p->id}},
             p->waits > 0 ? p->wait_ms_sum / p->waits : 0.0);
  m.family("llm_d_epp_program_aware_attained_service_tokens", "gauge",
           "Time-decayed attained service (weighted tokens consumed) per program.");
  for (const auto* p : rows)
    m.sample("llm_d_epp_program_aware_attained_service_tokens", {{"program_id", p->id}},
             p->attained_service);
}

}  // namespace sluice::admin
