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

namespace {

// What one flow's records add up to before its figures are computed.
struct FlowSamples {
  std::vector<double> e2e, ttft, tpot, itl;
  std::uint64_t window_events = 0;       // token events received in the window
  double in_tokens = 0, out_tokens = 0;  // of requests completed in the window
  // Outstanding answers over time: +1 at sent, -1 at done.
  std::vector<std::pair<double, int>> edges;
};

// The measured window: [start, end), `length` seconds (never 0).
struct Window {
  double start = 0, end = 0, length = 0;
};

// Every request counts once, in the outcome table of the whole run.
void count_outcome(const RequestRecord& r, FlowStats& f) {
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
}

// One request's share of its flow's figures (`buckets`: seconds of the
// token throughput series).
void add_record(const RequestRecord& r, const Window& w, double run_end, std::size_t buckets,
                FlowStats& f, FlowSamples& s) {
  const double end = r.done >= 0 ? r.done : run_end;
  s.edges.push_back({r.sent, +1});
  s.edges.push_back({end, -1});
  count_outcome(r, f);
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
    s.window_events += t >= w.start && t < w.end;
    for (const float g : r.token_gaps) {
      t += g;
      if (t < w.start || t >= w.end) continue;
      s.itl.push_back(g);
      s.window_events += 1;
    }
  }
  // Rates and latencies: the measured window.
  if (r.sent >= w.start && r.sent < w.end) {
    if (r.status / 100 == 2 && r.done >= 0) {
      s.e2e.push_back(r.done - r.sent);
      if (r.first_token >= 0) {
        s.ttft.push_back(r.first_token - r.sent);
        if (r.output_tokens > 1)
          s.tpot.push_back((r.done - r.first_token) / static_cast<double>(r.output_tokens - 1));
      }
    }
  }
  if (r.status / 100 == 2 && r.done >= w.start && r.done < w.end) {
    s.in_tokens += static_cast<double>(r.input_tokens);
    s.out_tokens += static_cast<double>(r.output_tokens);
    f.completed_rate += 1;
  }
}

// Within the window, how long a flow was active (`active`: its active
// intervals) and how much of that it had an answer outstanding (`edges`,
// sorted here).
struct Busy {
  double active = 0, busy = 0;
};
Busy busy_time(std::vector<std::pair<double, int>>& edges,
               const std::vector<std::pair<double, double>>& active, const Window& w) {
  std::sort(edges.begin(), edges.end());
  Busy out;
  for (const auto& [a, b] : active) {
    const double lo = std::max(a, w.start), hi = std::min(b, w.end);
    if (hi <= lo) continue;
    out.active += hi - lo;
    int outstanding = 0;
    double last = lo;
    for (const auto& [t, d] : edges) {
      const double tc = std::clamp(t, lo, hi);
      if (outstanding > 0) out.busy += tc - last;
      last = tc;
      outstanding += d;
    }
    if (outstanding > 0) out.busy += hi - last;
  }
  return out;
}

// Flow `i`'s figures from its samples (moved out): rates over the window,
// latency summaries, its token share of `all_tokens`, backlogged or not.
void finish_flow(std::size_t i, const std::vector<RequestRecord>& records,
                 const std::vector<std::pair<double, double>>& active, const Window& w,
                 double all_tokens, FlowSamples& s, FlowStats& f) {
  std::uint64_t sent_in_window = 0;
  for (const auto& r : records)
    if (static_cast<std::size_t>(r.flow) == i && r.sent >= w.start && r.sent < w.end)
      ++sent_in_window;
  f.offered_rate = static_cast<double>(sent_in_window) / w.length;
  f.completed_rate /= w.length;
  f.input_tokens_per_s = s.in_tokens / w.length;
  f.output_tokens_per_s = s.out_tokens / w.length;
  f.token_share = all_tokens > 0 ? (s.in_tokens + s.out_tokens) / all_tokens : 0;
  f.e2e = summarize(std::move(s.e2e));
  f.ttft = summarize(std::move(s.ttft));
  f.itl = summarize(std::move(s.itl));
  f.token_events_per_s = static_cast<double>(s.window_events) / w.length;
  f.tpot = summarize(std::move(s.tpot));
  // Backlogged: an answer outstanding for >= 90% of the time the flow
  // was active within the window.
  const Busy b = busy_time(s.edges, active, w);
  f.backlogged_fraction = b.active > 0 ? b.busy / b.active : 0;
  f.backlogged = b.active > 0 && f.backlogged_fraction >= 0.9;
}

// Jain's index per group of two or more backlogged flows (over token
// throughput / weight), in group name order.
std::vector<GroupFairness> group_fairness(const std::vector<std::string>& names,
                                          const std::vector<std::string>& groups,
                                          const std::vector<FlowStats>& flows,
                                          const std::vector<FlowSamples>& samples, double window) {
  std::map<std::string, GroupFairness> by_group;
  std::map<std::string, std::vector<double>> values;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!flows[i].backlogged) continue;
    const std::string& g = i < groups.size() ? groups[i] : std::string();
    by_group[g].group = g;
    by_group[g].flows.push_back(names[i]);
    values[g].push_back((samples[i].in_tokens + samples[i].out_tokens) / window / flows[i].weight);
  }
  std::vector<GroupFairness> out;
  for (auto& [g, gf] : by_group) {
    if (gf.flows.size() < 2) continue;
    gf.jain = jain_index(values[g]);
    out.push_back(gf);
  }
  return out;
}

}  // namespace

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
  const Window w{window_start, window_end, std::max(1e-9, window_end - window_start)};
  const std::size_t buckets = static_cast<std::size_t>(std::ceil(std::max(run_end, window_end)));
  std::vector<FlowSamples> samples(n);
  for (std::size_t i = 0; i < n; ++i) {
    run.flows[i].name = names[i];
    run.flows[i].weight = weights[i];
    run.flows[i].not_sent = not_sent[i];
    run.flows[i].tokens_per_s_series.assign(buckets, 0);
  }
  for (const auto& r : records) {
    const std::size_t fi = static_cast<std::size_t>(r.flow);
    add_record(r, w, run_end, buckets, run.flows[fi], samples[fi]);
  }
  double all_tokens = 0;
  for (std::size_t i = 0; i < n; ++i) all_tokens += samples[i].in_tokens + samples[i].out_tokens;
  std::vector<double> jain_values;
  for (std::size_t i = 0; i < n; ++i) {
    auto& f = run.flows[i];
    finish_flow(i, records, active[i], w, all_tokens, samples[i], f);
    if (f.backlogged) {
      ++run.backlogged_flows;
      jain_values.push_back((samples[i].in_tokens + samples[i].out_tokens) / w.length / f.weight);
    }
    run.total_sent += f.sent;
    run.total_ok += f.ok;
    run.total_shed += f.shed;
    run.total_errors += f.errors;
    run.total_lost += f.lost;
  }
  run.jain_backlogged = jain_index(jain_values);
  run.groups = group_fairness(names, groups, run.flows, samples, w.length);
  return run;
}

}  // namespace sluice::load
