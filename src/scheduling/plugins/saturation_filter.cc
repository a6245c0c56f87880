#include "scheduling/plugins/saturation_filter.h"

namespace sluice::scheduling {

flowcontrol::EndpointLoad load_of(const Endpoint& e) {
  flowcontrol::EndpointLoad l;
  l.has_metrics = e.metrics.update_time != TimePoint{};
  l.metrics_time = e.metrics.update_time;
  l.waiting = e.metrics.waiting_queue_size;
  l.running = e.metrics.running_requests_size;
  l.kv_cache_usage = e.metrics.kv_cache_usage;
  l.in_flight = e.in_flight;
  l.dispatched_since_scrape = e.dispatched_since_scrape;
  l.in_flight_tokens = e.in_flight_tokens;
  return l;
}

void SaturationFilter::filter(CycleState&, const Request&,
                              std::vector<const Endpoint*>& candidates) {
  const auto now = Clock::now();
  kept_.clear();
  for (const Endpoint* e : candidates)
    if (detector_->has_room(load_of(*e), now)) kept_.push_back(e);
  if (kept_.empty() && fail_open_) return;
  candidates.swap(kept_);
}

}  // namespace sluice::scheduling
