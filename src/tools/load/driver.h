// Runs a scenario against an OpenAI-compatible endpoint: one thread, one
// io_context, Beast HTTP/1.1 (over TLS for https) with keep-alive connections; open-loop
// (Poisson, constant) and closed-loop arrivals, phases, a request cap and
// a duration, then a bounded drain. Records every request it sent.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/load/scenario.h"
#include "tools/load/stats.h"

namespace sluice::load {

struct RunResult {
  std::vector<RequestRecord> records;
  std::vector<std::vector<std::pair<double, double>>> active;  // per flow
  std::vector<std::uint64_t> not_sent;                         // per flow
  double end = 0;           // seconds: when the last answer came (or the drain ended)
  double arrivals_end = 0;  // when arrivals stopped: the duration, or earlier at the request cap
};

struct DriverOptions {
  std::string host = "127.0.0.1";
  std::string port = "8080";
  bool tls = false;       // https: TLS to the target, verified against ca_file
  std::string ca_file;    // PEM CA bundle; "": the system's
  bool progress = false;  // a live line on stderr, once a second
};

RunResult run_scenario(const Scenario& scenario, const DriverOptions& options);

// The prompt text of `tokens` tokens (about 4 characters each); a shared
// prefix `prefix` (>= 0) makes the first `prefix_tokens` identical across
// requests. Deterministic for a given rng state.
std::string make_prompt(Rng& rng, std::uint64_t tokens, int prefix, std::uint64_t prefix_tokens);

}  // namespace sluice::load
