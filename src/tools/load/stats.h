// The statistics sluice-load reports: per request records reduced to per
// flow figures (rates, token throughput and shares, latency percentiles,
// outcomes, endpoints), time series, and Jain's fairness index.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sluice::load {

// What happened to one request (times in seconds since the run started).
struct RequestRecord {
  int flow = 0;
  double sent = 0;
  double first_byte = -1;           // response head received
  double first_token = -1;          // first SSE data event with content (streams)
  double done = -1;                 // last byte, or the error
  int status = 0;                   // 0: no HTTP answer at all
  std::string reason;               // x-gateway-inference-dropped-reason ("" none)
  std::string endpoint;             // x-gateway-destination-endpoint-served
  std::string error;                // transport error ("" none)
  std::uint64_t input_tokens = 0;   // usage.prompt_tokens, else what was sent
  std::uint64_t output_tokens = 0;  // usage.completion_tokens, else token events
  std::uint64_t token_events = 0;   // SSE events with content
  // Streams: the gap before each token event after the first, in seconds
  // (the events' times are first_token plus the running sum). Events read
  // in one go have a gap of 0: what the client saw.
  std::vector<float> token_gaps;
  double last_token = -1;
};

// Nearest-rank percentile (p in [0, 100]) of `sorted` (ascending); 0 if empty.
double percentile(const std::vector<double>& sorted, double p);
// Jain's index (sum x)^2 / (n * sum x^2): 1 = equal, 1/n = one takes all. 1 for n = 0.
double jain_index(const std::vector<double>& x);

struct LatencySummary {
  std::uint64_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  std::vector<double> sorted;  // for CDFs
};
LatencySummary summarize(std::vector<double> values);

struct FlowStats {
  std::string name;
  double weight = 1;
  std::uint64_t sent = 0;
  std::uint64_t ok = 0;        // 2xx
  std::uint64_t shed = 0;      // non-2xx with a typed reason header
  std::uint64_t errors = 0;    // non-2xx without a reason
  std::uint64_t lost = 0;      // no HTTP answer (transport error, timeout, cut at the end)
  std::uint64_t not_sent = 0;  // arrivals the driver could not send (connection cap)
  double offered_rate = 0;     // requests/s sent in the window
  double completed_rate = 0;   // 2xx/s in the window
  double input_tokens_per_s = 0, output_tokens_per_s = 0;
  double token_share = 0;   // of all flows' (input + output) token throughput
  bool backlogged = false;  // had an answer outstanding >= 90% of its active time
  double backlogged_fraction = 0;
  LatencySummary e2e, ttft, tpot;  // seconds (2xx only)
  // Streams: inter-token gaps of events received in the window (seconds),
  // and token events received in the window per second.
  LatencySummary itl;
  double token_events_per_s = 0;
  std::map<std::string, std::uint64_t> outcomes;   // "200", "429 rejected-capacity", "lost: ..."
  std::map<std::string, std::uint64_t> endpoints;  // served-by counts
  std::vector<double> tokens_per_s_series;         // 1 s buckets over the run
};

// Jain's index among the backlogged flows of one group (flows that should
// get equal service per weight, e.g. one objective's tenants).
struct GroupFairness {
  std::string group;
  std::vector<std::string> flows;  // the backlogged members
  double jain = 1;
};

struct RunStats {
  double window_start = 0, window_end = 0;  // the measured window (after warm-up)
  std::vector<FlowStats> flows;
  double jain_backlogged = 1;  // over token throughput / weight, backlogged flows
  std::size_t backlogged_flows = 0;
  std::vector<GroupFairness> groups;  // groups with two or more backlogged flows
  std::uint64_t total_sent = 0, total_ok = 0, total_shed = 0, total_errors = 0, total_lost = 0;
};

// `active[i]`: flow i's active intervals (start, stop) in run seconds.
RunStats compute_stats(const std::vector<RequestRecord>& records,
                       const std::vector<std::string>& names, const std::vector<double>& weights,
                       const std::vector<std::string>& groups,
                       const std::vector<std::vector<std::pair<double, double>>>& active,
                       const std::vector<std::uint64_t>& not_sent, double window_start,
                       double window_end, double run_end);

}  // namespace sluice::load
