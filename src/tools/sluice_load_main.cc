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
    "usage: sluice-load --scenario FILE [--target http(s)://HOST:PORT] [--ca-file FILE]\n"
    "                   [--json FILE] [--html FILE] [--requests FILE] [--duration D]\n"
    "                   [--max-requests N] [--quiet]\n"
    "Exit codes: 0 the run completed; 1 it could not run; 2 usage or an invalid scenario.\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "sluice-load: " << what << "\n" << kUsage;
  std::exit(2);
}

// The command line.
struct Arguments {
  std::string scenario_path, target, ca_file, json_path, html_path, requests_path, duration,
      max_requests;
  bool quiet = false;
};

// Reads the command line into `a`: false at --help, where reading stops.
bool parse_arguments(int argc, char** argv, Arguments& args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--scenario")
      args.scenario_path = value();
    else if (a == "--target")
      args.target = value();
    else if (a == "--ca-file")
      args.ca_file = value();
    else if (a == "--json")
      args.json_path = value();
    else if (a == "--html")
      args.html_path = value();
    else if (a == "--requests")
      args.requests_path = value();
    else if (a == "--duration")
      args.duration = value();
    else if (a == "--max-requests")
      args.max_requests = value();
    else if (a == "--quiet")
      args.quiet = true;
    else if (a == "--help" || a == "-h") {
      return false;
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  return true;
}

// --duration and --max-requests over the scenario's own.
void apply_overrides(const Arguments& args, sluice::load::Scenario& s) {
  if (!args.duration.empty()) {
    auto d = sluice::config::parse_duration(args.duration);
    if (!d || *d <= sluice::load::Duration::zero())
      usage_error("--duration must be a duration like 30s");
    s.duration = *d;
    if (s.warmup >= s.duration) s.warmup = {};
  }
  if (!args.max_requests.empty()) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(args.max_requests.c_str(), &end, 10);
    if (*end != '\0' || n == 0) usage_error("--max-requests must be a whole number > 0");
    s.max_requests = n;
  }
}

// The target: --target, else the scenario's (http://HOST:PORT or https://).
std::string target_of(const Arguments& args, const sluice::load::Scenario& s) {
  std::string target = args.target;
  if (target.empty()) target = s.target;
  if (target.empty())
    usage_error("no target: give --target http://HOST:PORT or target: in the scenario");
  if (target.rfind("http://", 0) != 0 && target.rfind("https://", 0) != 0)
    usage_error("--target must start with http:// or https://");
  return target;
}

// Where the driver connects (the target's host and port, 80 or 443 by
// default), over TLS or not, and whether it shows its progress.
sluice::load::DriverOptions driver_options(const std::string& target, const Arguments& args) {
  const bool tls = target.rfind("https://", 0) == 0;
  std::string hostport = target.substr(tls ? 8 : 7);
  if (auto slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  auto colon = hostport.rfind(':');
  sluice::load::DriverOptions o;
  o.host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  o.port = colon == std::string::npos ? (tls ? "443" : "80") : hostport.substr(colon + 1);
  o.tls = tls;
  o.ca_file = args.ca_file;
  o.progress = !args.quiet && isatty(STDERR_FILENO);
  return o;
}

// The run's figures over the measured window.
sluice::load::RunStats measure(const sluice::load::Scenario& s,
                               const sluice::load::RunResult& run) {
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
  return sluice::load::compute_stats(run.records, names, weights, groups, run.active, run.not_sent,
                                     window_start, window_end, run.end);
}

// Writes `path` through `write`: false (and said) if it could not.
template <class Write>
bool write_file(const std::string& path, Write&& write) {
  std::ofstream out(path);
  write(out);
  if (!out) {
    std::cerr << "sluice-load: cannot write " << path << "\n";
    return false;
  }
  return true;
}

// The reports asked for (--json, --requests, --html), in that order: the
// exit code (1 if one could not be written; those after it are not).
int write_reports(const Arguments& args, const sluice::load::Scenario& s,
                  const sluice::load::RunStats& stats, const sluice::load::RunResult& run,
                  const std::string& target) {
  if (!args.json_path.empty()) {
    const bool written = write_file(args.json_path, [&](std::ofstream& out) {
      out << sluice::load::report_text(sluice::load::json_report(s, stats, target), 2) << "\n";
    });
    if (!written) return 1;
  }
  if (!args.requests_path.empty()) {
    const bool written = write_file(args.requests_path, [&](std::ofstream& out) {
      for (const auto& r : run.records) out << sluice::load::request_line(s, r) << "\n";
    });
    if (!written) return 1;
  }
  if (!args.html_path.empty()) {
    const bool written = write_file(args.html_path, [&](std::ofstream& out) {
      out << sluice::load::html_report(s, stats, target);
    });
    if (!written) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (!parse_arguments(argc, argv, args)) {
    std::cout << kUsage;
    return 0;
  }
  if (args.scenario_path.empty()) usage_error("--scenario is required");
  sluice::load::Scenario s;
  try {
    s = sluice::load::load_scenario_file(args.scenario_path);
  } catch (const sluice::load::ScenarioError& e) {
    std::cerr << "sluice-load: invalid scenario: " << e.what() << "\n";
    return 2;
  }
  apply_overrides(args, s);
  const std::string target = target_of(args, s);
  const sluice::load::DriverOptions o = driver_options(target, args);

  sluice::load::RunResult run;
  try {
    run = sluice::load::run_scenario(s, o);
  } catch (const std::exception& e) {
    std::cerr << "sluice-load: cannot run against " << target << ": " << e.what() << "\n";
    return 1;
  }
  const sluice::load::RunStats stats = measure(s, run);
  if (!args.quiet) std::cout << sluice::load::terminal_report(s, stats);
  return write_reports(args, s, stats, run, target);
}
