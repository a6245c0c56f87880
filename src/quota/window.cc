#include "quota/window.h"

#include <algorithm>
#include <chrono>

namespace sluice::quota {

namespace {

constexpr Millis kDay = 86'400'000;
// A calendar limit spent far beyond its amount carries for this many
// periods at most in fits_at/resets_at's answer (a bound on their loop,
// not on what is carried).
constexpr int kMaxPeriodsAhead = 1200;

Millis floor_div(Millis a, Millis b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

std::chrono::year_month_day ymd_of(Millis t) {
  using namespace std::chrono;
  return year_month_day{sys_days{days{floor_div(t, kDay)}}};
}

Millis millis_of(std::chrono::year_month_day d) {
  return std::chrono::sys_days{d}.time_since_epoch().count() * kDay;
}

}  // namespace

Millis unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Millis calendar_start(Calendar c, Millis t) {
  if (c == Calendar::kMonth) {
    const auto d = ymd_of(t);
    return millis_of(d.year() / d.month() / 1);
  }
  return floor_div(t, kDay) * kDay;
}

Millis calendar_next(Calendar c, Millis t) {
  if (c == Calendar::kMonth) {
    const auto d = ymd_of(t);
    return millis_of(std::chrono::year_month_day{d.year() / d.month() / 1} +
                     std::chrono::months{1});
  }
  return calendar_start(c, t) + kDay;
}

Window::Window(Period p) : period_(p) {
  if (period_.calendar != Calendar::kNone) return;
  const Millis w = std::max<Millis>(period_.window, 1);
  width_ = std::max<Millis>(1, (w + 63) / 64);
  buckets_ = static_cast<int>((w + width_ - 1) / width_) + 1;
}

void Window::advance(Millis now, std::uint64_t amount) {
  if (now < now_) now = now_;
  now_ = now;
  if (period_.calendar != Calendar::kNone) {
    roll_calendar(now, amount);
    return;
  }
  const std::int64_t idx = index_of(now);
  if (idx <= head_) return;
  if (idx - head_ >= buckets_) {
    counts_.fill(0);
    used_ = 0;
  } else {
    for (std::int64_t k = head_ + 1; k <= idx; ++k) {
      auto& c = counts_[static_cast<std::size_t>(k % buckets_)];
      used_ -= c;
      c = 0;
    }
  }
  head_ = idx;
}

void Window::roll_calendar(Millis now, std::uint64_t amount) {
  if (period_end_ == 0) {
    period_end_ = calendar_next(period_.calendar, now);
    return;
  }
  while (now >= period_end_) {
    used_ = used_ > amount ? used_ - amount : 0;
    if (used_ == 0) {
      period_end_ = calendar_next(period_.calendar, now);
      return;
    }
    period_end_ = calendar_next(period_.calendar, period_end_);
  }
}

void Window::add(std::uint64_t n) {
  n = std::min(n, UINT64_MAX - used_);  // saturates: the buckets add up to used_
  used_ += n;
  if (period_.calendar == Calendar::kNone) counts_[static_cast<std::size_t>(head_ % buckets_)] += n;
}

std::optional<Millis> Window::fits_at(std::uint64_t amount, std::uint64_t held,
                                      std::uint64_t more) const {
  if (more > amount || held > amount - more) return std::nullopt;
  const std::uint64_t room = amount - held - more;  // what used may be
  if (used_ <= room) return now_;
  if (period_.calendar != Calendar::kNone) {
    // Each period end forgives up to `amount` of what is carried.
    std::uint64_t used = used_;
    Millis end = period_end_;
    for (int i = 0; i < kMaxPeriodsAhead; ++i) {
      used = used > amount ? used - amount : 0;
      if (used <= room) return end;
      end = calendar_next(period_.calendar, end);
    }
    return std::nullopt;
  }
  // Oldest first: bucket k leaves the window at (k + B) x w.
  std::uint64_t left = used_;
  for (std::int64_t k = head_ - buckets_ + 1; k <= head_; ++k) {
    left -= counts_[static_cast<std::size_t>(((k % buckets_) + buckets_) % buckets_)];
    if (left <= room) return (k + buckets_) * width_;
  }
  return (head_ + buckets_) * width_;  // unreachable: left reaches 0
}

int Window::export_counts(
    std::array<std::pair<std::int64_t, std::uint64_t>, kMaxBuckets>& out) const {
  if (used_ == 0) return 0;
  if (period_.calendar != Calendar::kNone) {
    out[0] = {calendar_start(period_.calendar, now_), used_};
    return 1;
  }
  int n = 0;
  for (std::int64_t k = head_ - buckets_ + 1; k <= head_; ++k) {
    const auto c = counts_[static_cast<std::size_t>(((k % buckets_) + buckets_) % buckets_)];
    if (c != 0 && n < kMaxBuckets) out[static_cast<std::size_t>(n++)] = {k, c};
  }
  return n;
}

Millis Window::resets_at() const {
  if (used_ == 0) return now_;
  if (period_.calendar != Calendar::kNone) return period_end_;
  for (std::int64_t k = head_; k > head_ - buckets_; --k)
    if (counts_[static_cast<std::size_t>(((k % buckets_) + buckets_) % buckets_)] != 0)
      return (k + buckets_) * width_;
  return now_;
}

}  // namespace sluice::quota
