#include "stats/sampling.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kbv::stats {
namespace {

std::vector<double> constant(size_t n, double v) { return std::vector<double>(n, v); }

TEST(Sampling, ProfilesAreNamedAndOrderedByPrecision) {
  auto quick = profile_by_name("quick");
  auto standard = profile_by_name("standard");
  auto precise = profile_by_name("precise");
  EXPECT_GT(quick.target, standard.target);
  EXPECT_GT(standard.target, precise.target);
  EXPECT_DOUBLE_EQ(standard.target, 0.005);
  EXPECT_THROW(profile_by_name("fast"), std::invalid_argument);
}

TEST(Sampling, NeverStopsBeforeTheMinimumEvenWhenPrecise) {
  auto p = profile_by_name("standard");
  auto few = constant(5, 1.0);
  EXPECT_EQ(should_stop(p, {few, few}, 0.0), StopReason::Continue);
}

TEST(Sampling, StopsWhenEverySideIsPrecise) {
  auto p = profile_by_name("standard");
  auto a = constant(30, 1.0), b = constant(30, 2.0);
  EXPECT_EQ(should_stop(p, {a, b}, 0.0), StopReason::Precise);
}

TEST(Sampling, OneNoisySideKeepsItGoing) {
  auto p = profile_by_name("standard");
  auto steady = constant(30, 1.0);
  std::vector<double> noisy;
  for (int i = 0; i < 30; ++i) noisy.push_back(1.0 + 0.2 * (i % 7));
  EXPECT_EQ(should_stop(p, {steady, noisy}, 1.0), StopReason::Continue);
  EXPECT_EQ(should_stop(p, {steady, noisy}, p.budget_seconds), StopReason::Budget);
}

TEST(Sampling, MaxSamplesEndsIt) {
  auto p = profile_by_name("quick");
  std::vector<double> noisy;
  for (int i = 0; i < p.max_samples; ++i) noisy.push_back(1.0 + (i % 2));
  EXPECT_EQ(should_stop(p, {noisy}, 0.0), StopReason::MaxSamples);
}

TEST(Sampling, RelativeHalfWidthByHand) {
  Summary s;
  s.n = 10;
  s.median = 2.0;
  s.ci_low = 1.9;
  s.ci_high = 2.1;
  EXPECT_NEAR(relative_half_width(s), 0.05, 1e-12);
  EXPECT_EQ(relative_half_width(Summary{}), INFINITY);
}

TEST(Sampling, RoundsAlternateDirection) {
  EXPECT_EQ(round_order(3, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(round_order(3, 1), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(round_order(3, 2), (std::vector<int>{0, 1, 2}));
}

TEST(Sampling, SpeedupRuleStopsOnTheRatiosInterval) {
  auto p = profile_by_name("standard");
  auto cand = constant(30, 0.5), base = constant(30, 1.0), other = constant(30, 2.0);
  EXPECT_EQ(should_stop_speedup(p, cand, {base, other}, 0.0), StopReason::Precise);
  // Below the minimum it never stops, however steady.
  auto few = constant(5, 1.0);
  EXPECT_EQ(should_stop_speedup(p, few, {few}, 0.0), StopReason::Continue);
  // One noisy baseline keeps it going, until the budget.
  std::vector<double> noisy;
  for (int i = 0; i < 30; ++i) noisy.push_back(1.0 + 0.2 * (i % 7));
  EXPECT_EQ(should_stop_speedup(p, cand, {base, noisy}, 1.0), StopReason::Continue);
  EXPECT_EQ(should_stop_speedup(p, cand, {base, noisy}, p.budget_seconds), StopReason::Budget);
  std::vector<double> many_noisy;
  for (int i = 0; i < p.max_samples; ++i) many_noisy.push_back(1.0 + 0.2 * (i % 7));
  EXPECT_EQ(should_stop_speedup(p, many_noisy, {many_noisy}, 0.0), StopReason::MaxSamples);
}

TEST(Sampling, SpeedupRuleIsStricterThanEitherSideAlone) {
  // Each side's median interval within 0.5% does not make the ratio's interval so: the widths
  // add up (here 0.48% each, 0.54% for the ratio).
  auto p = profile_by_name("standard");
  std::vector<double> cand, base;
  for (int i = 0; i < 40; ++i) {
    cand.push_back(1.0 + 0.012 * ((i * 7 % 11) - 5) / 5.0);
    base.push_back(2.0 * (1.0 + 0.012 * ((i * 3 % 11) - 5) / 5.0));
  }
  ASSERT_LE(relative_half_width(summarize(cand)), p.target);
  ASSERT_LE(relative_half_width(summarize(base)), p.target);
  EXPECT_EQ(should_stop(p, {cand, base}, 0.0), StopReason::Precise);
  EXPECT_GT(relative_half_width(speedup(base, cand, 0.02, 0.95, 500)), p.target);
  EXPECT_EQ(should_stop_speedup(p, cand, {base}, 0.0), StopReason::Continue);
}

TEST(Sampling, WarmupSteadyWhenSuccessiveMediansAgree) {
  EXPECT_FALSE(warmup_steady(std::vector<double>{}));
  EXPECT_FALSE(warmup_steady(std::vector<double>{1.0}));
  EXPECT_FALSE(warmup_steady(std::vector<double>{2.0, 1.5}));       // clocks still rising
  EXPECT_TRUE(warmup_steady(std::vector<double>{2.0, 1.5, 1.49}));  // within 2%
  EXPECT_FALSE(warmup_steady(std::vector<double>{1.0, 1.03}));
  EXPECT_TRUE(warmup_steady(std::vector<double>{1.0, 1.03}, 0.05));
}

TEST(Sampling, RatioHalfWidth) {
  Ratio r;
  r.value = 2.0;
  r.ci_low = 1.8;
  r.ci_high = 2.2;
  EXPECT_NEAR(relative_half_width(r), 0.1, 1e-12);
  EXPECT_EQ(relative_half_width(Ratio{}), INFINITY);
}

}  // namespace
}  // namespace kbv::stats
