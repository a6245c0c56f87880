// What a scheduling cycle knows about one model-server endpoint: who it is
// (address, labels, engine), the metrics last scraped from it, and the load
// sluice itself has put on it since. Built by the data layer (metrics) and
// the dispatcher (load); read-only to plugins.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sluice::scheduling {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Labels = std::map<std::string, std::string, std::less<>>;

// Metrics scraped from the endpoint's /metrics, mapped from the engine's own
// names (DESIGN.md §3.4). Fields the engine does not expose stay at their
// defaults.
struct Metrics {
  // The fields the load scorers read each cycle come first (see Endpoint).
  double waiting_queue_size = 0;            // requests queued on the server
  double running_requests_size = 0;         // requests in its running batch
  double kv_cache_usage = 0;                // 0..1
  std::vector<std::string> active_models;   // LoRA adapters loaded and running
  std::vector<std::string> waiting_models;  // LoRA adapters requested, not yet loaded
  int max_active_models = 0;                // max LoRA adapters at once; 0: unknown
  int cache_block_size = 0;                 // tokens per KV block; 0: unknown
  std::uint64_t cache_num_gpu_blocks = 0;
  TimePoint update_time{};  // when these were scraped; epoch: never
};

// Laid out hot first, on a cache line of its own: what every cycle reads of
// every endpoint (slot, room, sluice's load, its labels' version, the three
// scraped loads) is in the first 56 bytes, so a cycle over 512 endpoints
// touches one line each instead of three or four.
struct alignas(64) Endpoint {
  std::uint32_t index = 0;  // the endpoint's slot in the pool, stable while it exists
  // The saturation detector's verdict for one more request.
  bool has_room = true;
  // Metrics missing or older than the staleness threshold.
  bool stale = true;
  // sluice's own load, kept by the dispatcher between scrapes.
  std::uint32_t in_flight = 0;
  std::uint32_t dispatched_since_scrape = 0;
  std::uint64_t in_flight_tokens = 0;  // input + max output of those in flight
  // Changes whenever `labels` do, to a number this endpoint's slot never
  // had (the pool's writer, Controller::set_endpoints, counts them): the
  // label-reading plugins keep what they derive from labels by slot and
  // this (scheduling/plugins/label_cache.h) instead of looking labels up
  // each cycle. Code that edits the labels of an endpoint a scheduler has
  // already seen changes it too.
  std::uint64_t labels_version = 0;
  Metrics metrics;
  std::string address;  // host:port
  std::string engine = "vllm";
  Labels labels;
};

}  // namespace sluice::scheduling
