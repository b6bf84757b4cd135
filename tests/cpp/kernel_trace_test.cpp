#include "judge/kernel_trace.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {
using nlohmann::json;

json act(const std::string& name, long long stream, double start, double end,
         const std::string& kind = "kernel") {
  return {{"name", name}, {"stream", stream}, {"start_us", start}, {"end_us", end}, {"kind", kind}};
}

json trace(json activities, double call_end, long long current = 7) {
  return {{"available", true},
          {"current_stream", current},
          {"call_end_us", call_end},
          {"activity_count", activities.size()},
          {"activities", activities}};
}

bool has(const KernelTraceAssessment& a, const std::string& id, Severity s) {
  for (const auto& f : a.flags) {
    if (f.id == id && f.severity == s) return true;
  }
  return false;
}

TEST(KernelTrace, OriginByName) {
  std::vector<std::string> own = {"tc_gemm_kernel", "relu_kernel"};
  EXPECT_EQ(
      kernel_origin("void tc_gemm_kernel<128, 128, 2, 4, 0, 0, false>(GemmArgs)", "kernel", own),
      "own");  // "gemm" in an own kernel's name stays own
  EXPECT_EQ(kernel_origin("void relu_kernel2(float const*, float*, long)", "kernel", own),
            "other");  // whole identifiers only
  EXPECT_EQ(kernel_origin("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "kernel", own), "library");
  EXPECT_EQ(
      kernel_origin("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "kernel", own),
      "library");
  EXPECT_EQ(kernel_origin("void at::native::vectorized_elementwise_kernel<4, ...>", "kernel", own),
            "aten");
  EXPECT_EQ(kernel_origin("Memcpy DtoD (Device -> Device)", "copy", own), "copy");
}

TEST(KernelTrace, HonestKernelOnCurrentStream) {
  auto a = assess_kernel_trace(
      trace({act("void relu_kernel(float const*, float*, long)", 7, 1, 40)}, 41), {"relu_kernel"},
      false, 1);
  EXPECT_TRUE(a.available);
  EXPECT_TRUE(a.own_kernels_ran);
  EXPECT_TRUE(a.flags.empty());
  EXPECT_DOUBLE_EQ(a.record["span_us"].get<double>(), 39.0);
}

TEST(KernelTrace, UnjoinedSideStreamEscapes) {
  // The current stream's end marker finishes at 4 us; the side stream's kernel runs to 140 us.
  auto a = assess_kernel_trace(
      trace({act("void relu_side_kernel(float const*, float*, long)", 13, 2, 140)}, 4),
      {"relu_side_kernel"}, false, 1);
  EXPECT_TRUE(has(a, "timing_escapes_events", Severity::Reject));
  EXPECT_NEAR(a.record["escaped_us"].get<double>(), 136.0, 1e-9);
}

TEST(KernelTrace, JoinedSideStreamIsOnlyNoted) {
  // Joined: the current stream waited, so its end marker (142 us) follows the side kernel.
  auto a = assess_kernel_trace(
      trace({act("void relu_joined_kernel(float const*, float*, long)", 13, 2, 140)}, 142),
      {"relu_joined_kernel"}, false, 1);
  EXPECT_FALSE(has(a, "timing_escapes_events", Severity::Reject));
  EXPECT_TRUE(has(a, "side_stream_work", Severity::Info));
}

TEST(KernelTrace, SmallEscapeWithinSlack) {
  auto a = assess_kernel_trace(trace({act("k", 13, 0, 1000), act("own_k", 7, 0, 990)}, 997),
                               {"own_k"}, false, 1);
  EXPECT_FALSE(has(a, "timing_escapes_events", Severity::Reject));  // 3 us < 5 us
}

TEST(KernelTrace, GhostGlobalKernel) {
  auto a = assess_kernel_trace(
      trace({act("void at::native::vectorized_elementwise_kernel<4, clamp_min>", 7, 1, 9)}, 10),
      {"relu_vec4_kernel"}, false, 1);
  EXPECT_TRUE(has(a, "kernel_never_called", Severity::Reject));
  EXPECT_FALSE(has(a, "library_main_op", Severity::Reject));  // ReLU has no heavy operator
  EXPECT_FALSE(a.own_kernels_ran);
}

TEST(KernelTrace, NoExtensionCallIsNotAGhost) {
  // Pure PyTorch or Triton candidates: no __global__ names, nothing to miss.
  auto a = assess_kernel_trace(trace({act("triton_poi_fused_relu_0", 7, 1, 9)}, 10), {}, false, 0);
  EXPECT_TRUE(a.flags.empty());
}

TEST(KernelTrace, CublasCalledDirectly) {
  auto a = assess_kernel_trace(
      trace({act("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", 7, 1, 300)}, 301), {}, true, 1);
  EXPECT_TRUE(has(a, "library_main_op", Severity::Reject));
  EXPECT_FALSE(has(a, "kernel_never_called", Severity::Reject));
}

TEST(KernelTrace, LibraryConvWithOwnEpilogueIsHonest) {
  auto a = assess_kernel_trace(
      trace({act("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nchwkcrs_nchw", 7, 1, 200),
             act("void bias_tanh_kernel(float*, float const*, float const*, long, int, long)", 7,
                 201, 220)},
            221),
      {"bias_tanh_kernel"}, true, 1);
  EXPECT_TRUE(a.flags.empty());
  EXPECT_TRUE(a.own_kernels_ran);
}

TEST(KernelTrace, GraphReplayCountsAsOwnKernels) {
  // The extension function is not called during a replay; its kernel still runs.
  auto a = assess_kernel_trace(
      trace({act("void relu_graph_kernel(float const*, float*, long)", 7, 1, 9)}, 10),
      {"relu_graph_kernel"}, false, 0);
  EXPECT_TRUE(a.own_kernels_ran);
  EXPECT_TRUE(a.flags.empty());
}

TEST(KernelTrace, UnavailableTraceDecidesNothing) {
  auto a =
      assess_kernel_trace({{"available", false}, {"why", "not a CUDA device"}}, {"k"}, true, 1);
  EXPECT_FALSE(a.available);
  EXPECT_TRUE(a.flags.empty());
}

}  // namespace
}  // namespace kbv::judge
