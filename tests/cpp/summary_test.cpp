// Timing statistics against values computed by hand: the order-statistic ranks of the median's
// confidence interval come from binomial(n, 1/2) tail sums, written out in each test.

#include "stats/summary.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace kbv::stats {
namespace {

std::vector<double> iota(size_t n, double start = 1) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  // Shuffled, so that the summary has to sort.
  std::shuffle(v.begin(), v.end(), std::mt19937(42));
  return v;
}

std::vector<double> jittered(size_t n, double center, double spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-spread, spread);
  std::vector<double> v(n);
  for (double& x : v) x = center + u(rng);
  return v;
}

TEST(Summarize, Empty) {
  const Summary s = summarize({});
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.ci_low, 0);
  EXPECT_EQ(s.ci_high, 0);
  EXPECT_EQ(s.stdev, 0);
}

TEST(Summarize, SingleSample) {
  const std::vector<double> x{2.5};
  const Summary s = summarize(x);
  EXPECT_EQ(s.n, 1u);
  EXPECT_EQ(s.median, 2.5);
  EXPECT_EQ(s.ci_low, 2.5);
  EXPECT_EQ(s.ci_high, 2.5);
  EXPECT_EQ(s.mean, 2.5);
  EXPECT_EQ(s.stdev, 0);
  EXPECT_EQ(s.min, 2.5);
  EXPECT_EQ(s.max, 2.5);
}

TEST(Summarize, TenSamples) {
  // P(B <= 1) = 11/1024 = 0.0107 <= 0.025 < P(B <= 2) = 56/1024: ranks 2 and 9, coverage 97.9%.
  const Summary s = summarize(iota(10));
  EXPECT_EQ(s.n, 10u);
  EXPECT_EQ(s.median, 5.5);
  EXPECT_EQ(s.ci_low, 2);
  EXPECT_EQ(s.ci_high, 9);
  EXPECT_EQ(s.mean, 5.5);
  EXPECT_NEAR(s.stdev, std::sqrt(82.5 / 9), 1e-12);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 10);
}

TEST(Summarize, NineSamples) {
  // P(B <= 1) = 10/512 = 0.0195 <= 0.025 < P(B <= 2) = 46/512: ranks 2 and 8.
  const Summary s = summarize(iota(9));
  EXPECT_EQ(s.median, 5);
  EXPECT_EQ(s.ci_low, 2);
  EXPECT_EQ(s.ci_high, 8);
}

TEST(Summarize, TwentySamplesAtTwoConfidences) {
  // P(B <= 5) = 21700/2^20 = 0.0207 <= 0.025 < P(B <= 6) = 60460/2^20: ranks 6 and 15.
  const Summary s95 = summarize(iota(20));
  EXPECT_EQ(s95.ci_low, 6);
  EXPECT_EQ(s95.ci_high, 15);
  // P(B <= 3) = 1351/2^20 = 0.0013 <= 0.005 < P(B <= 4) = 6196/2^20: ranks 4 and 17.
  const Summary s99 = summarize(iota(20), 0.99);
  EXPECT_EQ(s99.ci_low, 4);
  EXPECT_EQ(s99.ci_high, 17);
  EXPECT_EQ(s99.confidence, 0.99);
}

TEST(Summarize, TooFewSamplesGiveTheFullRange) {
  // n = 5: P(B <= 0) = 1/32 > 0.025, no pair of ranks reaches 95%; n = 6: 1/64 does.
  const Summary s5 = summarize(iota(5));
  EXPECT_EQ(s5.ci_low, 1);
  EXPECT_EQ(s5.ci_high, 5);
  const Summary s6 = summarize(iota(6));
  EXPECT_EQ(s6.ci_low, 1);
  EXPECT_EQ(s6.ci_high, 6);
  EXPECT_EQ(s6.median, 3.5);
}

TEST(Summarize, LargeSamplesUseTheNormalApproximation) {
  // n = 2001, values 0..2000: k = floor(n/2 - z*sqrt(n)/2 + 1/2) = floor(1001 - 43.837) = 957,
  // so the interval is [x_(957), x_(1045)] = [956, 1044] around the median 1000.
  const Summary s = summarize(iota(2001, 0));
  EXPECT_EQ(s.median, 1000);
  EXPECT_EQ(s.ci_low, 956);
  EXPECT_EQ(s.ci_high, 1044);
}

TEST(Summarize, ExactAndApproximateAgreeAtTheSwitch) {
  // n = 1000 (exact): P(B <= 468) = 0.0232 <= 0.025 < P(B <= 469) = 0.0269, ranks 469 and 532.
  const Summary s = summarize(iota(1000));
  EXPECT_EQ(s.ci_low, 469);
  EXPECT_EQ(s.ci_high, 532);
}

TEST(Summarize, RejectsNonsenseConfidence) {
  EXPECT_THROW(summarize(iota(5), 1.0), std::invalid_argument);
  EXPECT_THROW(summarize(iota(5), 0.0), std::invalid_argument);
}

TEST(Summarize, Json) {
  const auto j = summarize(iota(10)).to_json();
  EXPECT_EQ(j["n"], 10);
  EXPECT_EQ(j["median_ms"], 5.5);
  EXPECT_EQ(j["ci_low_ms"], 2);
  EXPECT_EQ(j["confidence"], 0.95);
  EXPECT_EQ(summarize(iota(10)).to_json("_us")["max_us"], 10);
}

TEST(Speedup, EmptyOrDegenerateInputs) {
  const std::vector<double> some{1, 2, 3}, zeros{0, 0};
  const Ratio a = speedup({}, some), b = speedup(some, {}), c = speedup(some, zeros);
  for (const Ratio& r : {a, b, c}) {
    EXPECT_EQ(r.value, 0);
    EXPECT_FALSE(r.tie);
  }
}

TEST(Speedup, ValueIsTheRatioOfMedians) {
  const std::vector<double> baseline{3, 1, 2, 100}, candidate{1, 1, 2};
  EXPECT_EQ(speedup(baseline, candidate).value, 2.5);  // median 2.5 / median 1
}

TEST(Speedup, SameDistributionIsATie) {
  const Ratio r = speedup(jittered(100, 1.0, 0.1, 1), jittered(100, 1.0, 0.1, 2));
  EXPECT_TRUE(r.tie);
  EXPECT_LE(r.ci_low, 1);
  EXPECT_GE(r.ci_high, 1);
}

TEST(Speedup, ClearWin) {
  const Ratio r = speedup(jittered(50, 2.0, 0.05, 1), jittered(50, 1.0, 0.05, 2));
  EXPECT_NEAR(r.value, 2.0, 0.1);
  EXPECT_GT(r.ci_low, 1.8);
  EXPECT_LT(r.ci_high, 2.2);
  EXPECT_LE(r.ci_low, r.value);
  EXPECT_GE(r.ci_high, r.value);
  EXPECT_FALSE(r.tie);
}

TEST(Speedup, ClearLoss) {
  const Ratio r = speedup(jittered(50, 1.0, 0.05, 1), jittered(50, 2.0, 0.05, 2));
  EXPECT_NEAR(r.value, 0.5, 0.03);
  EXPECT_LT(r.ci_high, 1);
  EXPECT_FALSE(r.tie);
}

TEST(Speedup, InsideTheTieBandIsATie) {
  // No noise at all: the interval is the point 1.01, which excludes 1, but 1% is inside 2%.
  const std::vector<double> baseline(20, 1.01), candidate(20, 1.0);
  const Ratio r = speedup(baseline, candidate);
  EXPECT_DOUBLE_EQ(r.ci_low, 1.01);
  EXPECT_DOUBLE_EQ(r.ci_high, 1.01);
  EXPECT_TRUE(r.tie);
  EXPECT_FALSE(speedup(baseline, candidate, /*tie_band=*/0.005).tie);
}

TEST(Speedup, BootstrapIsDeterministicGivenTheSeed) {
  const auto b = jittered(40, 1.3, 0.3, 1), c = jittered(40, 1.0, 0.3, 2);
  const Ratio first = speedup(b, c), again = speedup(b, c);
  EXPECT_EQ(first.ci_low, again.ci_low);
  EXPECT_EQ(first.ci_high, again.ci_high);
  const Ratio other = speedup(b, c, 0.02, 0.95, 2000, 12345);
  EXPECT_EQ(other.value, first.value);
  EXPECT_NE(other.ci_low, first.ci_low);
  const auto j = first.to_json();
  EXPECT_EQ(j["value"], first.value);
  EXPECT_EQ(j["tie"], first.tie);
}

TEST(Speedup, TieClassificationAtTheEdges) {
  // Just outside the 2% band with a point interval: a win, not a tie.
  const std::vector<double> fast(20, 1.0), slower(20, 1.03), slowest(20, 0.97);
  EXPECT_FALSE(speedup(slower, fast).tie);
  EXPECT_FALSE(speedup(slowest, fast).tie);  // a 3% loss is a loss
  // A 10% ratio whose interval still contains 1 (noisy, few samples): a tie.
  const Ratio wide = speedup(jittered(8, 1.1, 0.5, 3), jittered(8, 1.0, 0.5, 4));
  ASSERT_LE(wide.ci_low, 1.0);
  ASSERT_GE(wide.ci_high, 1.0);
  EXPECT_TRUE(wide.tie);
  // The same 10% with tight samples is no tie.
  EXPECT_FALSE(speedup(jittered(100, 1.1, 0.01, 3), jittered(100, 1.0, 0.01, 4)).tie);
}

}  // namespace
}  // namespace kbv::stats
