// The scheduler: one cycle per request against one consistent endpoint
// snapshot. The profile handler chooses profiles (repeatedly, so later ones
// may depend on earlier results); each profile filters, scores with its
// weighted scorers and picks; the handler merges the results.
//
// Runs on the dispatcher thread only (single writer of every plugin's
// state). Scratch space is kept between cycles: no allocation per endpoint
// per scorer. Each plugin call is timed for metrics
// (inference_extension_plugin_duration_seconds).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/plugin.h"
#include "sluice/scheduling/interfaces.h"

namespace sluice::scheduling {

// Latency histogram of one plugin (or the whole cycle). Written by the
// dispatcher, read by the metrics endpoint: relaxed atomics.
struct Timing {
  // Upper bounds in seconds, GIE-like for sub-millisecond plugin calls.
  static constexpr std::array<double, 12> kBounds = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5,
                                                     1e-4, 2e-4, 5e-4, 1e-3, 5e-3, 1e-2};
  std::string
      extension_point;  // Filter | Scorer | Picker | ProfileHandler | RequestLifecycle | Cycle
  std::string type;
  std::string name;
  std::array<std::atomic<std::uint64_t>, kBounds.size() + 1> buckets{};  // last: +Inf
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> sum_ns{0};
  void record(std::chrono::nanoseconds d);
};

namespace detail {
// Whether the CPU runs the AVX2 build of the cycle's sum loop.
bool cpu_has_avx2();
// The cycle's sum loop (total[i] = (first ? 0 : total[i]) + w * row[i]
// clamped into [0, 1], NaN to 0), in its AVX2 or its generic build; for
// the test that the two agree to the bit. Call the AVX2 one only where
// cpu_has_avx2().
void add_weighted_for_test(bool avx2, const double* row, double w, bool first, double* total,
                           std::size_t n);
}  // namespace detail

// What the I/O thread computes for the scheduler before admission.
struct RequestPreparation {
  bool prefix_hashes = false;  // a prefix-aware plugin is configured
  std::uint32_t block_size_tokens = 16;
  std::uint32_t chars_per_token = 4;
  std::uint32_t max_prefix_blocks = 256;
};

class Scheduler {
 public:
  struct Options {
    // Flow control on: only endpoints whose saturation detector says they
    // have room are candidates (dispatch never overshoots an endpoint).
    bool require_room = false;
  };

  Scheduler(std::vector<std::unique_ptr<Plugin>> plugins, std::vector<Profile> profiles,
            ProfileHandler* handler, std::string handler_name, RequestPreparation prep,
            Options options);
  ~Scheduler();

  // The candidate columns each cycle builds: those some scorer of the
  // profiles reads (Scorer::columns_read).
  std::uint32_t columns_built() const { return columns_read_; }

  // One scheduling cycle. `result` is overwritten (its storage reused).
  void schedule(CycleState& cycle, const Request& request, std::span<const Endpoint> endpoints,
                SchedulingResult& result);
  // After the dispatch of `result`: lifecycle plugins (prefix index update,
  // headers). May add headers to `result`.
  void dispatched(CycleState& cycle, const Request& request, SchedulingResult& result);
  // The response's first body bytes arrived (lifecycle plugins'
  // response_started).
  void started(CycleState& cycle, const Request& request);
  // Some lifecycle plugin acts on response_started (else no request of
  // this scheduler needs its first-byte event).
  bool wants_started() const { return wants_started_; }
  // After the response ended on endpoint slot `endpoint_index`.
  void completed(CycleState& cycle, const Request& request, std::uint32_t endpoint_index,
                 std::uint64_t output_tokens);

  const RequestPreparation& preparation() const { return prep_; }
  std::span<const Profile> profiles() const { return profiles_; }
  const Plugin* plugin(std::string_view name) const;
  Plugin* plugin(std::string_view name) {
    return const_cast<Plugin*>(std::as_const(*this).plugin(name));
  }
  // Every plugin instance, in the config's order (for the per-plugin metrics).
  std::span<const std::unique_ptr<Plugin>> plugins() const { return plugins_; }
  // Timings: one per plugin use, then the whole cycle (last).
  const std::vector<std::unique_ptr<Timing>>& timings() const { return timings_; }
  const Timing& cycle_timing() const { return *timings_.back(); }
  void set_require_room(bool on) { options_.require_room = on; }

 private:
  // The pool view's epoch moves when the endpoints' array or labels changed.
  void watch_labels(std::span<const Endpoint> endpoints, bool versions_changed);
  void run_profile(const Profile& profile, CycleState& cycle, const Request& request,
                   ProfileResult& out);
  Timing* timing_for(const std::string& point, const std::string& name);

  std::vector<std::unique_ptr<Plugin>> plugins_;
  std::vector<Profile> profiles_;
  ProfileHandler* handler_;
  RequestPreparation prep_;
  Options options_;
  std::vector<RequestLifecycle*> lifecycle_;
  bool wants_started_ = false;
  std::vector<std::unique_ptr<Timing>> timings_;
  // Timing slots per profile step, in the profiles' order.
  struct ProfileTimings {
    std::vector<Timing*> filters, scorers;
    Timing* picker = nullptr;
  };
  std::vector<ProfileTimings> profile_timings_;
  Timing* handler_timing_ = nullptr;  // pick and process_results
  std::vector<Timing*> lifecycle_timings_;
  // Scratch, reused between cycles.
  std::vector<const Endpoint*> all_;
  std::vector<const Endpoint*> candidates_;
  std::uint32_t columns_read_ = 0;  // the columns some scorer reads (only those are built)
  // For the plugins that read labels (PoolViewer): the cycle's endpoints
  // and their labels' epoch, and each endpoint's labels_version as last
  // seen (by position).
  PoolView pool_view_;
  bool viewers_ = false;
  std::vector<std::uint64_t> seen_versions_;
  CandidateColumns all_columns_;        // aligned with all_
  CandidateColumns candidate_columns_;  // aligned with candidates_ (after filters)
  std::vector<double> scores_;
  std::vector<double> totals_;
  std::vector<ScoredEndpoint> pick_scratch_;
  std::vector<ProfileResult> results_;
  std::size_t results_used_ = 0;
  std::vector<const Profile*> next_;
};

}  // namespace sluice::scheduling
