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

}  // namespace
}  // namespace kbv::stats
