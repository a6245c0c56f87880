// quota::Window on a fake clock: sliding windows against the true sliding
// sum as oracle, UTC calendar boundaries, carried spend, fits_at/resets_at.
#include "quota/window.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <utility>

namespace sluice::quota {
namespace {

constexpr Millis kDay = 86'400'000;
// 2026-12-07T00:00:00Z
constexpr Millis kDec7 = 1'796'601'600'000;

TEST(QuotaWindow, SlidingNeverCountsLessThanTheTrueWindowNorLongerThanTwoBucketsMore) {
  for (Millis W : {Millis{1000}, Millis{60'000}, Millis{3'600'000}, 31 * kDay}) {
    Window w(Period{W});
    std::mt19937_64 rng(static_cast<std::uint64_t>(W));
    std::deque<std::pair<Millis, std::uint64_t>> spends;
    Millis now = kDec7 + 12345;
    const Millis slack = 2 * w.bucket_width();
    for (int i = 0; i < 4000; ++i) {
      now += static_cast<Millis>(rng() % static_cast<std::uint64_t>(W / 40 + 1));
      w.advance(now, 0);
      if (rng() % 2) {
        const std::uint64_t n = rng() % 1000;
        w.add(n);
        spends.emplace_back(now, n);
      }
      std::uint64_t in_window = 0, in_wider = 0;
      for (auto& [t, n] : spends) {
        if (t > now - W) in_window += n;
        if (t > now - W - slack) in_wider += n;
      }
      ASSERT_GE(w.used(), in_window) << "W " << W << " at step " << i;
      ASSERT_LE(w.used(), in_wider) << "W " << W << " at step " << i;
      while (!spends.empty() && spends.front().first <= now - W - slack) spends.pop_front();
    }
  }
}

TEST(QuotaWindow, SlidingSpendLeavesWhenItsBucketDoes) {
  Window w(Period{60'000});
  ASSERT_EQ(w.bucket_width(), 938);   // ceil(60000 / 64)
  const Millis t0 = 938 * 2'000'000;  // a bucket's start
  w.advance(t0, 100);
  w.add(70);
  w.advance(t0 + 30'000, 100);
  w.add(20);
  EXPECT_EQ(w.used(), 90u);
  // 65 buckets: the first spend is counted until (k + 65) x w.
  const Millis first_leaves = t0 + 65 * 938;
  EXPECT_EQ(w.fits_at(100, 0, 80), first_leaves);
  EXPECT_EQ(w.fits_at(100, 0, 10), t0 + 30'000);   // fits now
  EXPECT_EQ(w.fits_at(100, 5, 96), std::nullopt);  // held + more > amount
  EXPECT_EQ(w.fits_at(100, 0, 101), std::nullopt);
  w.advance(first_leaves - 1, 100);
  EXPECT_EQ(w.used(), 90u);
  w.advance(first_leaves, 100);
  EXPECT_EQ(w.used(), 20u);
  const Millis second_bucket = (t0 + 30'000) / 938;
  EXPECT_EQ(w.resets_at(), (second_bucket + 65) * 938);
  w.advance(w.resets_at(), 100);
  EXPECT_EQ(w.used(), 0u);
  EXPECT_EQ(w.resets_at(), (second_bucket + 65) * 938);  // nothing left: now
}

TEST(QuotaWindow, SpendSaturatesInsteadOfWrappingAround) {
  Window w(Period{60'000});
  w.advance(kDec7, 10);
  w.add(UINT64_MAX - 5);
  w.add(100);
  EXPECT_EQ(w.used(), UINT64_MAX);
  w.advance(kDec7 + 70'000, 10);
  EXPECT_EQ(w.used(), 0u);
}

TEST(QuotaWindow, TimeNeverRunsBackwards) {
  Window w(Period{1000});
  w.advance(kDec7 + 5000, 10);
  w.add(5);
  w.advance(kDec7, 10);  // earlier: taken as the last now
  w.add(1);
  EXPECT_EQ(w.used(), 6u);
  w.advance(kDec7 + 5000 + 1100, 10);
  EXPECT_EQ(w.used(), 0u);
}

TEST(QuotaWindow, CalendarBoundariesAreUtc) {
  EXPECT_EQ(calendar_start(Calendar::kDay, kDec7 + 1), kDec7);
  EXPECT_EQ(calendar_next(Calendar::kDay, kDec7 - 1), kDec7);
  EXPECT_EQ(calendar_next(Calendar::kDay, kDec7), kDec7 + kDay);
  // December 2026 starts 2026-12-01, January 2027 at 2027-01-01.
  const Millis dec1 = kDec7 - 6 * kDay;
  EXPECT_EQ(calendar_start(Calendar::kMonth, kDec7), dec1);
  EXPECT_EQ(calendar_next(Calendar::kMonth, kDec7), dec1 + 31 * kDay);
  // February 2028 (a leap year) has 29 days: 2028-02-01 is 1'832'976'000'000.
  const Millis feb1_2028 = 1'832'976'000'000;
  EXPECT_EQ(calendar_next(Calendar::kMonth, feb1_2028 + 28 * kDay), feb1_2028 + 29 * kDay);
  EXPECT_EQ(calendar_start(Calendar::kMonth, feb1_2028 + 29 * kDay - 1), feb1_2028);
}

TEST(QuotaWindow, ADaysSpendEndsAtMidnightUtc) {
  Window w(Period{0, Calendar::kDay});
  w.advance(kDec7 + kDay - 1, 100);
  w.add(60);
  EXPECT_EQ(w.resets_at(), kDec7 + kDay);
  EXPECT_EQ(w.fits_at(100, 0, 50), kDec7 + kDay);
  EXPECT_EQ(w.fits_at(100, 0, 40), kDec7 + kDay - 1);
  w.advance(kDec7 + kDay, 100);
  EXPECT_EQ(w.used(), 0u);
}

TEST(QuotaWindow, CalendarSpendBeyondTheLimitIsCarriedNotForgiven) {
  Window w(Period{0, Calendar::kDay});
  w.advance(kDec7 + 1000, 100);
  w.add(250);  // a request used far more than it reserved
  // 150 is carried into the next day, 50 into the one after: 1 more fits then.
  EXPECT_EQ(w.fits_at(100, 0, 1), kDec7 + 2 * kDay);
  w.advance(kDec7 + kDay, 100);
  EXPECT_EQ(w.used(), 150u);
  w.advance(kDec7 + 2 * kDay + 5, 100);
  EXPECT_EQ(w.used(), 50u);
  w.advance(kDec7 + 9 * kDay, 100);
  EXPECT_EQ(w.used(), 0u);
}

TEST(QuotaWindow, AMonthRollsAtItsFirstDay) {
  Window w(Period{0, Calendar::kMonth});
  const Millis jan1 = kDec7 + 25 * kDay;  // 2027-01-01
  w.advance(jan1 - 1, 1000);
  w.add(999);
  EXPECT_EQ(w.resets_at(), jan1);
  w.advance(jan1, 1000);
  EXPECT_EQ(w.used(), 0u);
  EXPECT_EQ(w.resets_at(), jan1);  // nothing left
}

}  // namespace
}  // namespace sluice::quota
