// kbv::significant: the one formatting of figures for readers (issue 19: "0.00x" for a candidate
// 1,700x slower than its baseline).

#include "core/figure_format.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kbv {
namespace {

TEST(FigureFormat, ThreeSignificantDigits) {
  EXPECT_EQ(significant(1.0 / 1700), "0.000588");
  EXPECT_EQ(significant(1.3149), "1.31");
  EXPECT_EQ(significant(19.24), "19.2");
  EXPECT_EQ(significant(0.5), "0.500");
  EXPECT_EQ(significant(2), "2.00");
  EXPECT_EQ(significant(0.0625), "0.0625");
  EXPECT_EQ(significant(0.99951), "1.00");  // rounding carries into the next digit
  EXPECT_EQ(significant(9.996), "10.0");
  EXPECT_EQ(significant(99.96), "100");
}

TEST(FigureFormat, LargeValuesArePrintedWhole) {
  EXPECT_EQ(significant(123.4), "123");
  EXPECT_EQ(significant(1700), "1700");
  EXPECT_EQ(significant(1699.9999999999998), "1700");
  EXPECT_EQ(significant(19234.7), "19235");
  EXPECT_EQ(significant(2.5e12), "2500000000000");
  EXPECT_EQ(significant(1e20), "1.00e+20");
}

TEST(FigureFormat, ScientificOnlyBelowOneMillionth) {
  EXPECT_EQ(significant(1e-6), "0.00000100");
  EXPECT_EQ(significant(4.768e-7), "4.77e-07");
  EXPECT_EQ(significant(4.768e-7, 3, TrailingZeros::Trim), "4.77e-07");
  EXPECT_EQ(significant(5e-9, 3, TrailingZeros::Trim), "5e-09");
}

TEST(FigureFormat, TrimmedZerosAndOtherDigits) {
  EXPECT_EQ(significant(2, 4, TrailingZeros::Trim), "2");
  EXPECT_EQ(significant(0.6, 4, TrailingZeros::Trim), "0.6");
  EXPECT_EQ(significant(2.0 / 3, 4, TrailingZeros::Trim), "0.6667");
  EXPECT_EQ(significant(1.0 / 17000, 4, TrailingZeros::Trim), "0.00005882");
  EXPECT_EQ(significant(13, 4, TrailingZeros::Trim), "13");
  EXPECT_EQ(significant(1.0 / 3, 1), "0.3");
  EXPECT_EQ(significant(1.0 / 3, 40), "0.33333333333333331");  // at most 17 digits
}

TEST(FigureFormat, SignsZeroAndNonFinite) {
  EXPECT_EQ(significant(0), "0");
  EXPECT_EQ(significant(-0.25), "-0.250");
  EXPECT_EQ(significant(-1.0 / 1700), "-0.000588");
  EXPECT_EQ(significant(std::nan("")), "nan");
  EXPECT_EQ(significant(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(significant(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(FigureFormat, TimesIsTheSpeedupForm) {
  EXPECT_EQ(times(1.0 / 1700), "0.000588x");
  EXPECT_EQ(times(1.3149), "1.31x");
  EXPECT_EQ(times(19.24), "19.2x");
}

}  // namespace
}  // namespace kbv
