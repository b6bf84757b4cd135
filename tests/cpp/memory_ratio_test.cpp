#include <gtest/gtest.h>

#include "eval/phases.hpp"

using kbv::eval::kHostPeakResolutionBytes;
using kbv::eval::memory_peak_ratio;

namespace {
constexpr double KB = 1e3;
constexpr double MB = 1e6;
const std::string kHost = "process_peak_rss(vmhwm+sampling)";
const std::string kDevice = "cupti_memory_trace";
}  // namespace

TEST(MemoryPeakRatio, HostPeaksUnderTheResolutionCountAsIt) {
  // The honest CPU ReLU of the bundled suite: noise, not a cost.
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(213 * KB, 82 * KB, kHost), 1.0);
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(0, 0, kHost), 1.0);
  // A candidate that raises its peak beyond the resolution is still charged, against it.
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(50 * kHostPeakResolutionBytes, 10 * KB, kHost), 50.0);
  // Above it, the figures as measured.
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(300 * MB, 100 * MB, kHost), 3.0);
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(50 * MB, 100 * MB, kHost), 0.5);
}

TEST(MemoryPeakRatio, DeviceFiguresAreTakenAsTheyAre) {
  EXPECT_DOUBLE_EQ(*memory_peak_ratio(128 * KB, 64 * KB, kDevice), 2.0);
  EXPECT_FALSE(memory_peak_ratio(64 * KB, 0, kDevice).has_value());
}
