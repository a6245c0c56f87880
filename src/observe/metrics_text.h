// Prometheus text exposition (format 0.0.4) for GET /metrics: a small
// writer that keeps HELP/TYPE once per family and escapes label values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::observe {

class MetricsText {
 public:
  using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  // Starts a family (HELP and TYPE lines).
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, Labels labels, double value);
  // A histogram from per-bucket (non-cumulative) counts; `bounds` are the
  // upper bounds, `counts` has one more entry (+Inf).
  void histogram(std::string_view name, Labels labels, std::span<const double> bounds,
                 std::span<const std::uint64_t> counts, double sum);

  std::string& text() { return out_; }

 private:
  void labels(Labels l, std::string_view extra_key = {}, std::string_view extra_value = {});
  std::string out_;
};

}  // namespace sluice::observe
