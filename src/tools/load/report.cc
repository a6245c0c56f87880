#include "tools/load/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace sluice::load {

using json = nlohmann::json;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string ms(double seconds) { return fmt("%.0f", seconds * 1000); }

void table(std::ostringstream& os, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      os << cells[c];
      if (c + 1 < cells.size()) os << std::string(w[c] - cells[c].size() + 2, ' ');
    }
    os << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

json latency_json(const LatencySummary& l) {
  return {{"count", l.count}, {"p50", l.p50}, {"p90", l.p90},
          {"p99", l.p99},     {"max", l.max}, {"mean", l.mean}};
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// A line chart: x in [0, xmax], y in [0, ymax], one polyline per series.
// `fixed_ymax` > 0: the y axis ends there (a CDF: 1). `marks`: dashed
// vertical lines with a label (the measured window).
std::string line_chart(
    const std::string& title, const std::string& xlabel, const std::string& ylabel,
    const std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>& series,
    bool step = false, double fixed_ymax = 0,
    const std::vector<std::pair<double, std::string>>& marks = {}) {
  const double W = 640, H = 300, L = 60, R = 150, T = 30, B = 40;
  double xmax = 1e-9, ymax = 1e-9;
  for (const auto& [name, pts] : series)
    for (const auto& [x, y] : pts) {
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  for (const auto& [x, label] : marks) xmax = std::max(xmax, x);
  ymax = fixed_ymax > 0 ? fixed_ymax : ymax * 1.05;
  auto X = [&](double x) { return L + (W - L - R) * x / xmax; };
  auto Y = [&](double y) { return H - B - (H - T - B) * y / ymax; };
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
     << "' font-family='sans-serif' font-size='11'>";
  os << "<text x='" << L << "' y='18' font-size='13' font-weight='bold'>" << esc(title)
     << "</text>";
  os << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B
     << "' stroke='#333'/>";
  os << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B
     << "' stroke='#333'/>";
  for (int i = 0; i <= 4; ++i) {
    const double yv = ymax * i / 4, xv = xmax * i / 4;
    os << "<text x='" << L - 5 << "' y='" << Y(yv) + 4 << "' text-anchor='end'>"
       << fmt(ymax < 10 ? "%.2f" : "%.0f", yv) << "</text>";
    os << "<line x1='" << L << "' y1='" << Y(yv) << "' x2='" << W - R << "' y2='" << Y(yv)
       << "' stroke='#eee'/>";
    os << "<text x='" << X(xv) << "' y='" << H - B + 15 << "' text-anchor='middle'>"
       << fmt(xmax < 10 ? "%.2f" : "%.0f", xv) << "</text>";
  }
  os << "<text x='" << (L + W - R) / 2 << "' y='" << H - 5 << "' text-anchor='middle'>"
     << esc(xlabel) << "</text>";
  for (const auto& [x, label] : marks) {
    os << "<line x1='" << X(x) << "' y1='" << T << "' x2='" << X(x) << "' y2='" << H - B
       << "' stroke='#999' stroke-dasharray='4 3'/>";
    os << "<text x='" << X(x) + 3 << "' y='" << T + 10 << "' fill='#777'>" << esc(label)
       << "</text>";
  }
  os << "<text x='12' y='" << (T + H - B) / 2 << "' transform='rotate(-90 12 " << (T + H - B) / 2
     << ")' text-anchor='middle'>" << esc(ylabel) << "</text>";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [name, pts] = series[i];
    const char* color = kColors[i % 10];
    os << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
    double py = 0;
    bool first = true;
    for (const auto& [x, y] : pts) {
      if (step && !first) os << X(x) << "," << Y(py) << " ";
      os << X(x) << "," << Y(y) << " ";
      py = y;
      first = false;
    }
    os << "'/>";
    os << "<rect x='" << W - R + 10 << "' y='" << T + 16 * i << "' width='10' height='10' fill='"
       << color << "'/>";
    os << "<text x='" << W - R + 25 << "' y='" << T + 16 * i + 9 << "'>" << esc(name) << "</text>";
  }
  os << "</svg>";
  return os.str();
}

// Outcomes per flow as stacked horizontal bars: served, shed (typed), error, lost.
std::string outcome_bars(const RunStats& st) {
  const double W = 680, rowh = 26, L = 120, R = 60;
  const double H = 40 + rowh * static_cast<double>(st.flows.size()) + 30;
  std::uint64_t maxn = 1;
  for (const auto& f : st.flows) maxn = std::max<std::uint64_t>(maxn, f.sent + f.not_sent);
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
     << "' font-family='sans-serif' font-size='11'>";
  os << "<text x='" << L
     << "' y='18' font-size='13' font-weight='bold'>Outcomes per flow (requests)</text>";
  const struct {
    const char* name;
    const char* color;
  } parts[] = {{"served (2xx)", "#2ca02c"},
               {"shed, typed reason", "#ff7f0e"},
               {"error, no reason", "#d62728"},
               {"no answer", "#000000"},
               {"not sent", "#bbbbbb"}};
  for (std::size_t i = 0; i < st.flows.size(); ++i) {
    const auto& f = st.flows[i];
    const std::uint64_t v[] = {f.ok, f.shed, f.errors, f.lost, f.not_sent};
    double x = L;
    const double y = 30 + rowh * static_cast<double>(i);
    os << "<text x='" << L - 5 << "' y='" << y + 15 << "' text-anchor='end'>" << esc(f.name)
       << "</text>";
    for (int k = 0; k < 5; ++k) {
      const double w = (W - L - R) * static_cast<double>(v[k]) / static_cast<double>(maxn);
      if (w <= 0) continue;
      os << "<rect x='" << x << "' y='" << y << "' width='" << w << "' height='" << rowh - 6
         << "' fill='" << parts[k].color << "'><title>" << parts[k].name << ": " << v[k]
         << "</title></rect>";
      x += w;
    }
    os << "<text x='" << x + 4 << "' y='" << y + 15 << "'>" << f.sent << "</text>";
  }
  double lx = L;
  const double ly = H - 15;
  for (const auto& p : parts) {
    os << "<rect x='" << lx << "' y='" << ly - 9 << "' width='10' height='10' fill='" << p.color
       << "'/>";
    os << "<text x='" << lx + 14 << "' y='" << ly << "'>" << p.name << "</text>";
    lx += 14 + 5.6 * static_cast<double>(std::string(p.name).size()) + 12;
  }
  os << "</svg>";
  return os.str();
}

}  // namespace

std::string terminal_report(const Scenario& s, const RunStats& st) {
  std::ostringstream os;
  os << "\n" << s.name << ": " << fmt("%.0f", st.window_end - st.window_start) << " s measured";
  if (st.window_start > 0) os << " (after " << fmt("%.0f", st.window_start) << " s warm-up)";
  os << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : st.flows) {
    rows.push_back({f.name, fmt("%.1f", f.offered_rate), fmt("%.1f", f.completed_rate),
                    fmt("%.0f", f.input_tokens_per_s + f.output_tokens_per_s),
                    fmt("%.1f%%", f.token_share * 100), ms(f.e2e.p50), ms(f.e2e.p90), ms(f.e2e.p99),
                    ms(f.e2e.max), f.ttft.count ? ms(f.ttft.p99) : "-", std::to_string(f.ok),
                    std::to_string(f.shed), std::to_string(f.errors), std::to_string(f.lost),
                    f.backlogged ? "yes" : "no"});
  }
  table(os,
        {"FLOW", "SENT/s", "OK/s", "TOK/s", "SHARE", "P50ms", "P90ms", "P99ms", "MAXms", "TTFT-P99",
         "OK", "SHED", "ERR", "LOST", "BACKLOGGED"},
        rows);
  os << "\nOutcomes:\n";
  for (const auto& f : st.flows) {
    os << "  " << f.name << ":";
    for (const auto& [k, v] : f.outcomes) os << "  " << k << " x" << v;
    if (f.not_sent) os << "  not sent (connection cap) x" << f.not_sent;
    os << "\n";
  }
  os << "\nServed by:\n";
  for (const auto& f : st.flows) {
    os << "  " << f.name << ":";
    for (const auto& [k, v] : f.endpoints) os << "  " << k << " x" << v;
    os << "\n";
  }
  for (const auto& g : st.groups) {
    os << "\nJain's fairness index, group '" << (g.group.empty() ? "(no objective)" : g.group)
       << "' (";
    for (std::size_t i = 0; i < g.flows.size(); ++i) os << (i ? ", " : "") << g.flows[i];
    os << "): " << fmt("%.3f", g.jain);
  }
  os << "\nJain's fairness index over all " << st.backlogged_flows
     << " backlogged flow(s), across groups (priorities are meant to differ): "
     << fmt("%.3f", st.jain_backlogged) << "\n";
  os << "Requests: " << st.total_sent << " sent, " << st.total_ok << " served, " << st.total_shed
     << " shed with a reason, " << st.total_errors << " errors without one, " << st.total_lost
     << " without any answer\n";
  return os.str();
}

json json_report(const Scenario& s, const RunStats& st, const std::string& target) {
  json flows = json::array();
  for (const auto& f : st.flows) {
    flows.push_back({{"name", f.name},
                     {"weight", f.weight},
                     {"sent", f.sent},
                     {"ok", f.ok},
                     {"shed", f.shed},
                     {"errors", f.errors},
                     {"lost", f.lost},
                     {"notSent", f.not_sent},
                     {"offeredRate", f.offered_rate},
                     {"completedRate", f.completed_rate},
                     {"inputTokensPerSecond", f.input_tokens_per_s},
                     {"outputTokensPerSecond", f.output_tokens_per_s},
                     {"tokenShare", f.token_share},
                     {"backlogged", f.backlogged},
                     {"backloggedFraction", f.backlogged_fraction},
                     {"latencySeconds", latency_json(f.e2e)},
                     {"ttftSeconds", latency_json(f.ttft)},
                     {"interTokenSeconds", latency_json(f.itl)},
                     {"tokenEventsPerSecond", f.token_events_per_s},
                     {"tpotSeconds", latency_json(f.tpot)},
                     {"outcomes", f.outcomes},
                     {"endpoints", f.endpoints},
                     {"tokensPerSecondSeries", f.tokens_per_s_series}});
  }
  return {{"scenario", s.name},
          {"target", target},
          {"window", {{"start", st.window_start}, {"end", st.window_end}}},
          {"jainIndexBacklogged", st.jain_backlogged},
          {"groups",
           [&] {
             json g = json::array();
             for (const auto& x : st.groups)
               g.push_back({{"group", x.group}, {"flows", x.flows}, {"jainIndex", x.jain}});
             return g;
           }()},
          {"backloggedFlows", st.backlogged_flows},
          {"totals",
           {{"sent", st.total_sent},
            {"ok", st.total_ok},
            {"shed", st.total_shed},
            {"errors", st.total_errors},
            {"lost", st.total_lost}}},
          {"flows", flows}};
}

std::string html_report(const Scenario& s, const RunStats& st, const std::string& target) {
  std::ostringstream os;
  os << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>sluice-load: " << esc(s.name)
     << "</title>"
     << "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}"
        "td:first-child{text-align:left}.charts svg{margin:8px 16px 8px 0;border:1px solid "
        "#eee}</style></head><body>";
  os << "<h1>" << esc(s.name) << "</h1>";
  if (!s.description.empty()) os << "<p>" << esc(s.description) << "</p>";
  os << "<p>Target " << esc(target) << "; " << fmt("%.0f", st.window_end - st.window_start)
     << " s measured. Jain's fairness index over the backlogged flows' token throughput (per "
        "weight): <b>"
     << fmt("%.3f", st.jain_backlogged) << "</b> (" << st.backlogged_flows << " flows; 1 = equal)";
  for (const auto& g : st.groups) {
    os << "; within group <i>" << esc(g.group.empty() ? "(no objective)" : g.group) << "</i> (";
    for (std::size_t i = 0; i < g.flows.size(); ++i) os << (i ? ", " : "") << esc(g.flows[i]);
    os << "): <b>" << fmt("%.3f", g.jain) << "</b>";
  }
  os << ". Requests: " << st.total_sent << " sent, " << st.total_ok << " served, " << st.total_shed
     << " shed with a typed reason, " << st.total_errors << " errors without one, " << st.total_lost
     << " without any answer.</p>";
  os << "<table><tr><th>flow</th><th>sent/s</th><th>ok/s</th><th>tokens/s</th><th>share</"
        "th><th>p50 ms</th>"
        "<th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>TTFT p99 "
        "ms</th><th>served</th><th>shed</th>"
        "<th>errors</th><th>no answer</th><th>backlogged</th></tr>";
  for (const auto& f : st.flows) {
    os << "<tr><td>" << esc(f.name) << "</td><td>" << fmt("%.1f", f.offered_rate) << "</td><td>"
       << fmt("%.1f", f.completed_rate) << "</td><td>"
       << fmt("%.0f", f.input_tokens_per_s + f.output_tokens_per_s) << "</td><td>"
       << fmt("%.1f%%", f.token_share * 100) << "</td><td>" << ms(f.e2e.p50) << "</td><td>"
       << ms(f.e2e.p90) << "</td><td>" << ms(f.e2e.p99) << "</td><td>" << ms(f.e2e.max)
       << "</td><td>" << (f.ttft.count ? ms(f.ttft.p99) : "-") << "</td><td>" << f.ok << "</td><td>"
       << f.shed << "</td><td>" << f.errors << "</td><td>" << f.lost << "</td><td>"
       << (f.backlogged ? "yes" : "no") << "</td></tr>";
  }
  os << "</table><div class='charts'>";
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> tput, cdf;
  for (const auto& f : st.flows) {
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < f.tokens_per_s_series.size(); ++i)
      pts.push_back({static_cast<double>(i) + 0.5, f.tokens_per_s_series[i]});
    tput.push_back({f.name, pts});
    std::vector<std::pair<double, double>> c;
    const auto& v = f.e2e.sorted;
    const std::size_t step = std::max<std::size_t>(1, v.size() / 200);
    for (std::size_t i = 0; i < v.size(); i += step)
      c.push_back({v[i] * 1000, static_cast<double>(i + 1) / static_cast<double>(v.size())});
    if (!v.empty()) c.push_back({v.back() * 1000, 1.0});
    cdf.push_back({f.name, c});
  }
  std::vector<std::pair<double, std::string>> marks;
  if (st.window_start > 0) marks.push_back({st.window_start, "measured from"});
  marks.push_back({st.window_end, "arrivals end"});
  os << line_chart("Token throughput per flow over time", "seconds", "tokens/s", tput, false, 0,
                   marks);
  os << line_chart("End-to-end latency CDF (served requests)", "milliseconds", "fraction", cdf,
                   true, 1.0);
  os << outcome_bars(st);
  os << "</div><h2>Outcomes</h2><table><tr><th>flow</th><th>outcome</th><th>requests</th></tr>";
  for (const auto& f : st.flows)
    for (const auto& [k, v] : f.outcomes)
      os << "<tr><td>" << esc(f.name) << "</td><td style='text-align:left'>" << esc(k)
         << "</td><td>" << v << "</td></tr>";
  os << "</table><p style='color:#888'>Generated by sluice-load.</p></body></html>\n";
  return os.str();
}

std::string report_text(const nlohmann::json& report, int indent) {
  return report.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string request_line(const Scenario& s, const RequestRecord& r) {
  nlohmann::json j;
  j["flow"] = r.flow >= 0 && static_cast<std::size_t>(r.flow) < s.flows.size()
                  ? s.flows[static_cast<std::size_t>(r.flow)].name
                  : std::to_string(r.flow);
  j["sent"] = r.sent;
  j["firstByte"] = r.first_byte;
  j["firstToken"] = r.first_token;
  j["done"] = r.done;
  j["status"] = r.status;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (!r.endpoint.empty()) j["endpoint"] = r.endpoint;
  if (!r.error.empty()) j["error"] = r.error;
  j["inputTokens"] = r.input_tokens;
  j["outputTokens"] = r.output_tokens;
  return report_text(j);
}

}  // namespace sluice::load
