#include "judge/roofline.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {

constexpr double kL2 = 60.0 * 1024 * 1024;  // H200

TEST(Roofline, DocumentedPeaksByName) {
  auto h200 = documented_peaks("NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_DOUBLE_EQ(h200->bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->flops_per_s, 989.4e12);
  auto pcie = documented_peaks("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie.has_value());
  EXPECT_DOUBLE_EQ(pcie->bytes_per_s, 2.0e12);  // not the SXM figure
  EXPECT_FALSE(documented_peaks("NVIDIA GeForce RTX 4090").has_value());
}

TEST(Roofline, MeasuredPeaksGetHeadroom) {
  auto p = from_measured(3.0e12, 600e12);
  EXPECT_DOUBLE_EQ(p.bytes_per_s, 4.5e12);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 900e12);
}

// ReLU, 4096 x 8192 float32: 134217728 bytes in and out. Writes beyond the 60 MiB L2 must reach
// DRAM: 134217728 + (134217728 - 62914560) = 205520896 bytes; at 4.8 TB/s 0.0428168533 ms;
// threshold 0.8 x that = 0.0342534827 ms.
TEST(Roofline, MemoryBoundFloorByHand) {
  ReferenceCost relu{0.0, 134217728.0, 134217728.0, kL2};
  auto peaks = *documented_peaks("NVIDIA H200");
  auto honest = assess_roofline(relu, peaks, 0.0345);  // just above the threshold
  EXPECT_DOUBLE_EQ(honest.bytes, 205520896.0);
  EXPECT_NEAR(honest.memory_ms, 0.0428168533, 1e-9);
  EXPECT_DOUBLE_EQ(honest.compute_ms, 0.0);
  EXPECT_NEAR(honest.threshold_ms, 0.0342534827, 1e-9);
  EXPECT_FALSE(honest.below);
  EXPECT_TRUE(assess_roofline(relu, peaks, 0.0340).below);  // just below
  EXPECT_TRUE(assess_roofline(relu, peaks, 0.0).below);     // events that saw nothing
}

// Square matmul N = 4096: 2 N^3 = 137438953472 FLOPs at 989.4 TFLOPS = 0.1389114 ms, above the
// memory floor (2 x 64 MiB read + 4 MiB of the 64 MiB output beyond L2 = 138412032 bytes,
// 0.0288358 ms). The measured TF32 cuBLAS time (0.340 ms) passes; a memoised 0.03 ms does not.
TEST(Roofline, ComputeBoundFloorByHand) {
  ReferenceCost mm{137438953472.0, 134217728.0, 67108864.0, kL2};
  auto peaks = *documented_peaks("NVIDIA H200");
  auto cublas = assess_roofline(mm, peaks, 0.340);
  EXPECT_DOUBLE_EQ(cublas.bytes, 138412032.0);
  EXPECT_NEAR(cublas.memory_ms, 0.0288358400, 1e-9);
  EXPECT_NEAR(cublas.compute_ms, 0.1389114145, 1e-9);
  EXPECT_DOUBLE_EQ(cublas.floor_ms, cublas.compute_ms);
  EXPECT_FALSE(cublas.below);
  EXPECT_FALSE(assess_roofline(mm, peaks, 0.1112).below);  // floor x 0.8 = 0.111129
  EXPECT_TRUE(assess_roofline(mm, peaks, 0.03).below);
}

TEST(Roofline, NoPeaksNoFloor) {
  ReferenceCost mm{1e12, 1e9, 1e9, 0};
  auto r = assess_roofline(mm, DevicePeaks{}, 0.0);
  EXPECT_DOUBLE_EQ(r.floor_ms, 0.0);
  EXPECT_FALSE(r.below);
}

}  // namespace
}  // namespace kbv::judge
