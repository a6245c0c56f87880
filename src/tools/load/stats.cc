#include "tools/load/stats.h"

#include <algorithm>
#include <cmath>

namespace sluice::load {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t i =
      static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[i];
}

double jain_index(const std::vector<double>& x) {
  if (x.empty()) return 1;
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  if (squares == 0) return 1;
  return sum * sum / (static_cast<double>(x.size()) * squares);
}

LatencySummary summarize(std::vector<double> v) {
  LatencySummary s;
  std::sort(v.begin(), v.end());
  s.count = v.size();
  if (!v.empty()) {
    s.p50 = percentile(v, 50);
    s.p90 = percentile(v, 90);
    s.p99 = percentile(v, 99);
    s.max = v.back();
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / static_cast<double>(v.size());
  }
  s.sorted = std::move(v);
  return s;
}

RunStats compute_stats(const std::vector<RequestRecord>& records,
                       const std::vector<std::string>& names, const std::vector<double>& weights,
                       const std::vector<std::string>& groups,
                       const std::vector<std::vector<std::pair<double, double>>>& active,
                       const std::vector<std::uint64_t>& not_sent, double window_start,
                       double window_end, double run_end) {
  RunStats run;
  run.window_start = window_start;
  run.window_end = window_end;
  const std::size_t n = names.size();
  run.flows.resize(n);
  const double window = std::max(1e-9, window_end - window_start);
  const std::size_t buckets = static_cast<std::size_t>(std::ceil(std::max(run_end, window_end)));
  std::vector<std::vector<double>> e2e(n), ttft(n), tpot(n), itl(n);
  std::vector<std::uint64_t> window_events(n, 0);
  std::vector<double> in_tokens(n, 0), out_tokens(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    run.flows[i].name = names[i];
    run.flows[i].weight = weights[i];
    run.flows[i].not_sent = not_sent[i];
    run.flows[i].tokens_per_s_series.assign(buckets, 0);
  }
  // Outstanding answers over time, per flow: +1 at sent, -1 at done.
  std::vector<std::vector<std::pair<double, int>>> edges(n);
  for (const auto& r : records) {
    auto& f = run.flows[static_cast<std::size_t>(r.flow)];
    const std::size_t fi = static_cast<std::size_t>(r.flow);
    const double end = r.done >= 0 ? r.done : run_end;
    edges[fi].push_back({r.sent, +1});
    edges[fi].push_back({end, -1});
    // Every request counts once, in the outcome table of the whole run.
    std::string outcome;
    if (r.status == 0) {
      outcome = "lost: " + (r.error.empty() ? std::string("no answer") : r.error);
      f.lost += 1;
    } else if (r.status / 100 == 2) {
      outcome = std::to_string(r.status);
      f.ok += 1;
    } else if (!r.reason.empty()) {
      outcome = std::to_string(r.status) + " " + r.reason;
      f.shed += 1;
    } else {
      outcome = std::to_string(r.status);
      f.errors += 1;
    }
    f.sent += 1;
    f.outcomes[outcome] += 1;
    if (!r.endpoint.empty()) f.endpoints[r.endpoint] += 1;
    // Token throughput over time: a request's tokens land when it completes.
    if (r.status / 100 == 2 && r.done >= 0) {
      const std::size_t b = std::min(buckets - 1, static_cast<std::size_t>(r.done));
      if (buckets > 0)
        f.tokens_per_s_series[b] += static_cast<double>(r.input_tokens + r.output_tokens);
    }
    // Token events received in the window, whatever the request's fate:
    // their gaps, and how many.
    if (r.first_token >= 0) {
      double t = r.first_token;
      window_events[fi] += t >= window_start && t < window_end;
      for (const float g : r.token_gaps) {
        t += g;
        if (t < window_start || t >= window_end) continue;
        itl[fi].push_back(g);
        window_events[fi] += 1;
      }
    }
    // Rates and latencies: the measured window.
    if (r.sent >= window_start && r.sent < window_end) {
      if (r.status / 100 == 2 && r.done >= 0) {
        e2e[fi].push_back(r.done - r.sent);
        if (r.first_token >= 0) {
          ttft[fi].push_back(r.first_token - r.sent);
          if (r.output_tokens > 1)
            tpot[fi].push_back((r.done - r.first_token) / static_cast<double>(r.output_tokens - 1));
        }
      }
    }
    if (r.status / 100 == 2 && r.done >= window_start && r.done < window_end) {
      in_tokens[fi] += static_cast<double>(r.input_tokens);
      out_tokens[fi] += static_cast<double>(r.output_tokens);
      f.completed_rate += 1;
    }
  }
  double all_tokens = 0;
  for (std::size_t i = 0; i < n; ++i) all_tokens += in_tokens[i] + out_tokens[i];
  std::vector<double> jain_values;
  for (std::size_t i = 0; i < n; ++i) {
    auto& f = run.flows[i];
    std::uint64_t sent_in_window = 0;
    for (const auto& r : records)
      if (static_cast<std::size_t>(r.flow) == i && r.sent >= window_start && r.sent < window_end)
        ++sent_in_window;
    f.offered_rate = static_cast<double>(sent_in_window) / window;
    f.completed_rate /= window;
    f.input_tokens_per_s = in_tokens[i] / window;
    f.output_tokens_per_s = out_tokens[i] / window;
    f.token_share = all_tokens > 0 ? (in_tokens[i] + out_tokens[i]) / all_tokens : 0;
    f.e2e = summarize(std::move(e2e[i]));
    f.ttft = summarize(std::move(ttft[i]));
    f.itl = summarize(std::move(itl[i]));
    f.token_events_per_s = static_cast<double>(window_events[i]) / window;
    f.tpot = summarize(std::move(tpot[i]));
    // Backlogged: an answer outstanding for >= 90% of the time the flow
    // was active within the window.
    auto& ev = edges[i];
    std::sort(ev.begin(), ev.end());
    double active_time = 0, busy_time = 0;
    for (const auto& [a, b] : active[i]) {
      const double lo = std::max(a, window_start), hi = std::min(b, window_end);
      if (hi <= lo) continue;
      active_time += hi - lo;
      int outstanding = 0;
      double last = lo;
      for (const auto& [t, d] : ev) {
        const double tc = std::clamp(t, lo, hi);
        if (outstanding > 0) busy_time += tc - last;
        last = tc;
        outstanding += d;
      }
      if (outstanding > 0) busy_time += hi - last;
    }
    f.backlogged_fraction = active_time > 0 ? busy_time / active_time : 0;
    f.backlogged = active_time > 0 && f.backlogged_fraction >= 0.9;
    if (f.backlogged) {
      ++run.backlogged_flows;
      jain_values.push_back((in_tokens[i] + out_tokens[i]) / window / f.weight);
    }
    run.total_sent += f.sent;
    run.total_ok += f.ok;
    run.total_shed += f.shed;
    run.total_errors += f.errors;
    run.total_lost += f.lost;
  }
  run.jain_backlogged = jain_index(jain_values);
  std::map<std::string, GroupFairness> by_group;
  std::map<std::string, std::vector<double>> values;
  for (std::size_t i = 0; i < n; ++i) {
    if (!run.flows[i].backlogged) continue;
    const std::string& g = i < groups.size() ? groups[i] : std::string();
    by_group[g].group = g;
    by_group[g].flows.push_back(names[i]);
    values[g].push_back((in_tokens[i] + out_tokens[i]) / window / run.flows[i].weight);
  }
  for (auto& [g, gf] : by_group) {
    if (gf.flows.size() < 2) continue;
    gf.jain = jain_index(values[g]);
    run.groups.push_back(gf);
  }
  return run;
}

}  // namespace sluice::load
