// One limit's spend over time (issue 41, item 2): a sliding window kept as
// a ring of buckets, or a UTC calendar period (day, month). Pure: time is a
// value the caller passes (unix milliseconds, UTC), so windows, calendar
// boundaries and carried spend are tested on a fake clock. Not
// thread-safe: quota::Limit guards one with its lock.
//
// A sliding window of W is kept as buckets of w = ceil(W / 64) ms aligned
// to the unix epoch (every replica cuts time the same way, so a fleet can
// add its buckets), and B = ceil(W / w) + 1 of them: a spend made at t is
// counted from t until some time in [t + W, t + W + 2w), on average
// t + W + w. So the window never counts less than the true sliding window
// (a limit holds in every W), and gives up about 1/64 of it.
//
// A calendar period counts from its UTC start to its end. Spend beyond the
// limit (a request that used more than it reserved) is carried into the
// next period, never forgiven; a sliding window carries it by counting it
// for a whole W after it was settled.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

namespace sluice::quota {

using Millis = std::int64_t;  // unix milliseconds, UTC

enum class Calendar : std::uint8_t { kNone, kDay, kMonth };

struct Period {
  Millis window = 0;  // sliding, ms; 0 with a calendar
  Calendar calendar = Calendar::kNone;
  bool operator==(const Period&) const = default;
};

// The unix clock, in ms (windows are cut in UTC).
Millis unix_now_ms();

// The UTC day or month holding t: its start, and the next one's start.
Millis calendar_start(Calendar c, Millis t);
Millis calendar_next(Calendar c, Millis t);

class Window {
 public:
  static constexpr int kMaxBuckets = 66;  // ceil(W / ceil(W / 64)) + 1 <= 65

  explicit Window(Period p = {});

  // To `now` (never backwards: an earlier `now` is taken as the last one):
  // drops what left the window; a calendar period rolls over, carrying
  // what its spend exceeded `amount` by into the next.
  void advance(Millis now, std::uint64_t amount);
  // Settled spend, counted from the last advance's `now`.
  void add(std::uint64_t n);
  std::uint64_t used() const { return used_; }

  // The earliest time from the last advance's `now` at which `used() +
  // held + more <= amount`, counting only what leaves the window (held is
  // taken as it stands); nullopt when `held + more > amount` (it never
  // fits while `held` is held) or `more > amount` (never).
  std::optional<Millis> fits_at(std::uint64_t amount, std::uint64_t held, std::uint64_t more) const;
  // When everything counted now has left the window (now if nothing is).
  Millis resets_at() const;

  // What is counted, by bucket: (bucket index, count) for each non-empty
  // bucket of a sliding window (bucket k spans [k w, (k + 1) w) of unix
  // time); (the period's start, count) for a calendar period. At most
  // kMaxBuckets entries into `out`; returns how many.
  int export_counts(std::array<std::pair<std::int64_t, std::uint64_t>, kMaxBuckets>& out) const;
  int buckets() const { return buckets_; }

  const Period& period() const { return period_; }
  Millis bucket_width() const { return width_; }

 private:
  std::int64_t index_of(Millis t) const { return t / width_; }
  void roll_calendar(Millis now, std::uint64_t amount);

  Period period_;
  Millis width_ = 1;  // bucket width, ms (sliding)
  int buckets_ = 1;   // B (sliding)
  Millis now_ = 0;
  std::int64_t head_ = 0;  // the newest bucket's index (sliding)
  std::array<std::uint64_t, kMaxBuckets> counts_{};
  Millis period_end_ = 0;  // calendar: the current period's end (0: none yet)
  std::uint64_t used_ = 0;
};

}  // namespace sluice::quota
