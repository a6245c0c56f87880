// Saturation detectors (GIE plugin types and parameters).
//
// Where GIE gates dispatch on the pool's mean score (so it may dispatch while
// some endpoints are full, and overshoots between 50 ms scrapes), sluice
// asks per endpoint: a request is released only when some endpoint has room,
// and every request dispatched since that endpoint's last scrape counts
// against it (in-flight credit) until the next scrape shows it.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "sluice/flowcontrol/policies.h"

namespace sluice::flowcontrol {

struct UtilizationParams {
  double queue_depth_threshold = 5;
  double kv_cache_util_threshold = 0.8;
  Duration metrics_staleness_threshold = std::chrono::milliseconds(200);
  double headroom = 0;
};

// utilization-detector: per endpoint max(waiting / queueDepthThreshold,
// kv / kvCacheUtilThreshold) with the dispatches since the scrape added to
// `waiting`; room while below 1 + headroom. Stale or missing metrics: no room.
class UtilizationDetector final : public SaturationDetector {
 public:
  explicit UtilizationDetector(UtilizationParams p = {}) : p_(p) {}
  std::string_view type() const override { return "utilization-detector"; }
  bool has_room(const EndpointLoad& e, TimePoint now) const override;
  double saturation(const std::vector<EndpointLoad>& pool, TimePoint now) const override;
  double score(const EndpointLoad& e, TimePoint now) const;

 private:
  UtilizationParams p_;
};

struct ConcurrencyParams {
  bool tokens_mode = false;  // concurrencyMode: requests | tokens
  std::uint64_t max_concurrency = 100;
  std::uint64_t max_token_concurrency = 1000000;
  double headroom = 0;
};

// concurrency-detector: sluice's own in-flight count (or tokens) per endpoint
// against maxConcurrency (maxTokenConcurrency); needs no scraped metrics.
class ConcurrencyDetector final : public SaturationDetector {
 public:
  explicit ConcurrencyDetector(ConcurrencyParams p = {}) : p_(p) {}
  std::string_view type() const override { return "concurrency-detector"; }
  bool has_room(const EndpointLoad& e, TimePoint now) const override;
  void has_room_each(std::span<const EndpointLoad> pool, TimePoint now,
                     std::span<std::uint8_t> room) const override;
  double saturation(const std::vector<EndpointLoad>& pool, TimePoint now) const override;

 private:
  // What the limit counts of an endpoint (requests or tokens in flight),
  // and the limit with headroom.
  double used(const EndpointLoad& e) const;
  double limit() const;
  ConcurrencyParams p_;
};

}  // namespace sluice::flowcontrol
