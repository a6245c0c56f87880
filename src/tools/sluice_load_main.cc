// sluice-load: drives an OpenAI-compatible endpoint (sluice or any other)
// from a scenario file and reports what each flow got: a table on the
// terminal, a JSON file with every figure, a self-contained HTML report.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "config/units.h"
#include "tools/load/driver.h"
#include "tools/load/report.h"
#include "tools/load/scenario.h"

namespace {

constexpr const char* kUsage =
    "usage: sluice-load --scenario FILE [--target http://HOST:PORT] [--json FILE] [--html FILE]\n"
    "                   [--requests FILE] [--duration D] [--max-requests N] [--quiet]\n"
    "Exit codes: 0 the run completed; 1 it could not run; 2 usage or an invalid scenario.\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice-load: " << what << "\n" << kUsage;
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path, target, json_path, html_path, requests_path, duration, max_requests;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--scenario")
      scenario_path = value();
    else if (a == "--target")
      target = value();
    else if (a == "--json")
      json_path = value();
    else if (a == "--html")
      html_path = value();
    else if (a == "--requests")
      requests_path = value();
    else if (a == "--duration")
      duration = value();
    else if (a == "--max-requests")
      max_requests = value();
    else if (a == "--quiet")
      quiet = true;
    else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  if (scenario_path.empty()) usage_error("--scenario is required");
  sluice::load::Scenario s;
  try {
    s = sluice::load::load_scenario_file(scenario_path);
  } catch (const sluice::load::ScenarioError& e) {
    std::cerr << "sluice-load: invalid scenario: " << e.what() << "\n";
    return 2;
  }
  if (!duration.empty()) {
    auto d = sluice::config::parse_duration(duration);
    if (!d || *d <= sluice::load::Duration::zero())
      usage_error("--duration must be a duration like 30s");
    s.duration = *d;
    if (s.warmup >= s.duration) s.warmup = {};
  }
  if (!max_requests.empty()) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(max_requests.c_str(), &end, 10);
    if (*end != '\0' || n == 0) usage_error("--max-requests must be a whole number > 0");
    s.max_requests = n;
  }
  if (target.empty()) target = s.target;
  if (target.empty())
    usage_error("no target: give --target http://HOST:PORT or target: in the scenario");
  if (target.rfind("http://", 0) != 0) usage_error("--target must start with http://");
  std::string hostport = target.substr(7);
  if (auto slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  auto colon = hostport.rfind(':');
  sluice::load::DriverOptions o;
  o.host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  o.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  o.progress = !quiet && isatty(STDERR_FILENO);

  sluice::load::RunResult run;
  try {
    run = sluice::load::run_scenario(s, o);
  } catch (const std::exception& e) {
    std::cerr << "sluice-load: cannot run against " << target << ": " << e.what() << "\n";
    return 1;
  }
  std::vector<std::string> names;
  std::vector<double> weights;
  std::vector<std::string> groups;
  for (const auto& f : s.flows) {
    names.push_back(f.name);
    weights.push_back(f.weight);
    groups.push_back(f.group);
  }
  const double window_start = std::chrono::duration<double>(s.warmup).count();
  // The measured window ends when arrivals did: earlier than the duration
  // if the request cap stopped them, and a little later than it when an
  // arrival's timer, due just before the end, ran just after it (that
  // request was sent and answered; it is measured like the others). Rates
  // are per second of offered load.
  double window_end = std::chrono::duration<double>(s.duration).count();
  if (run.arrivals_end > window_start) window_end = run.arrivals_end;
  auto stats = sluice::load::compute_stats(run.records, names, weights, groups, run.active,
                                           run.not_sent, window_start, window_end, run.end);
  if (!quiet) std::cout << sluice::load::terminal_report(s, stats);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << sluice::load::report_text(sluice::load::json_report(s, stats, target), 2) << "\n";
    if (!out) {
      std::cerr << "sluice-load: cannot write " << json_path << "\n";
      return 1;
    }
  }
  if (!requests_path.empty()) {
    std::ofstream out(requests_path);
    for (const auto& r : run.records) out << sluice::load::request_line(s, r) << "\n";
    if (!out) {
      std::cerr << "sluice-load: cannot write " << requests_path << "\n";
      return 1;
    }
  }
  if (!html_path.empty()) {
    std::ofstream out(html_path);
    out << sluice::load::html_report(s, stats, target);
    if (!out) {
      std::cerr << "sluice-load: cannot write " << html_path << "\n";
      return 1;
    }
  }
  return 0;
}
