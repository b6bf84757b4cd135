#include "judge/kernel_trace.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {
using nlohmann::json;

json act(const std::string& name, long long stream, double start, double end,
         const std::string& kind = "kernel") {
  return {{"name", name}, {"stream", stream}, {"start_us", start}, {"end_us", end}, {"kind", kind}};
}

json launched(const std::string& name, const std::string& launcher, double start, double end,
              long long stream = 7) {
  json a = act(name, stream, start, end);
  a["launcher"] = launcher;
  return a;
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
  auto a = assess_kernel_trace(trace({act("triton_poi_fused_relu_0", 7, 1, 9)}, 10), OwnKernels{},
                               false, 0);
  EXPECT_TRUE(a.flags.empty());
}

TEST(KernelTrace, CublasCalledDirectly) {
  auto a =
      assess_kernel_trace(trace({act("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", 7, 1, 300)}, 301),
                          OwnKernels{}, true, 1);
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

// -- who computed: no_custom_kernel from the GPU's own account (issue 19) ----------------------
const std::string kTorch = "torch";
const std::string kExt = "ext:kbv_cpu_l1_mse.so";

TEST(KernelTrace, OriginByLauncher) {
  OwnKernels own{{"mse_partial_kernel", "Kernel"}, {"add_kernel"}};
  // The candidate's extension launched it: own when it is one of its __global__ kernels,
  // else still the candidate's (a kernel compiled into its extension from a header library).
  EXPECT_EQ(kernel_origin("void mse_partial_kernel<256>(float const*)", "kernel", own, kExt),
            "own");
  EXPECT_EQ(kernel_origin("void cutlass::Kernel2<GemmSm90>(Params)", "kernel", own, kExt),
            "candidate");
  // A library launched it: a library kernel whatever the name says (a __global__ the candidate
  // named "Kernel" does not make cuBLAS's cutlass::Kernel its own).
  EXPECT_EQ(kernel_origin("void cutlass::Kernel<GemmSm90>(Params)", "kernel", own, "cublas"),
            "library");
  EXPECT_EQ(
      kernel_origin("void cudnn::engines_precompiled::nchwToNhwcKernel", "kernel", own, "cudnn"),
      "library");
  // PyTorch launched it: PyTorch's, unless it is one of the candidate's Triton kernels run by
  // PyTorch's static Triton launcher.
  EXPECT_EQ(
      kernel_origin("void at::native::vectorized_elementwise_kernel<4>", "kernel", own, kTorch),
      "aten");
  EXPECT_EQ(kernel_origin("triton_poi_fused_pow_sub_0", "kernel", own, kTorch), "aten");
  EXPECT_EQ(kernel_origin("add_kernel", "kernel", own, kTorch), "candidate");
  // Triton's own launcher, ctypes: the candidate's JIT-compiled kernels.
  EXPECT_EQ(kernel_origin("matmul_kernel", "kernel", own, "triton"), "candidate");
  EXPECT_EQ(kernel_origin("my_ptx_kernel", "kernel", own, "ctypes"), "candidate");
  // A graph replay or no launcher: the name decides, as before.
  EXPECT_EQ(kernel_origin("void mse_partial_kernel<256>(float const*)", "kernel", own, "graph"),
            "own");
  EXPECT_EQ(kernel_origin("add_kernel", "kernel", own, ""), "candidate");
  EXPECT_EQ(kernel_origin("void at_cuda_detail::cub::DeviceReduceKernel<>", "kernel", own, ""),
            "aten");
  EXPECT_EQ(kernel_origin("Memcpy DtoD (Device -> Device)", "copy", own, kTorch), "copy");
}

TEST(KernelTrace, OnlyPyTorchAndLibraryKernelsAreNoCustomKernel) {
  // F.mse_loss on the GPU: PyTorch's elementwise and reduction kernels, nothing of its own.
  auto a = assess_kernel_trace(
      trace({launched("void at::native::vectorized_elementwise_kernel<4, mse>", kTorch, 1, 30),
             launched("void at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps>>", kTorch,
                      31, 60)},
            61),
      OwnKernels{}, false, 0);
  EXPECT_TRUE(has(a, "no_custom_kernel", Severity::Reject));
  EXPECT_TRUE(a.decides_custom_code);
  EXPECT_EQ(a.kernels, 2);
  EXPECT_EQ(a.candidate_kernels, 0);
  EXPECT_EQ(a.record["attributed_by"], "launcher");
  EXPECT_EQ(a.record["by_origin"]["aten"], 2);
}

TEST(KernelTrace, AnExtensionThatOnlyCallsCublasIsNoCustomKernel) {
  // at::bmm or cublasSgemm inside the candidate's C++: the extension ran, its kernels did not.
  auto a = assess_kernel_trace(
      trace({launched("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", "cublas", 1, 300)}, 301),
      OwnKernels{}, true, 1);
  EXPECT_TRUE(has(a, "no_custom_kernel", Severity::Reject));
  EXPECT_TRUE(has(a, "library_main_op", Severity::Reject));
}

TEST(KernelTrace, OwnKernelDoingMostOfTheWorkWithTorchGlueIsNotFlagged) {
  // The candidate's reduction does the work; PyTorch zero-fills an accumulator and divides.
  auto a = assess_kernel_trace(
      trace(
          {launched("void at::native::vectorized_elementwise_kernel<4, FillFunctor>", kTorch, 1, 3),
           launched("void mse_partial_kernel<256>(float const*, float const*, double*, long)", kExt,
                    4, 94),
           launched("void at::native::vectorized_elementwise_kernel<4, DivFunctor>", kTorch, 95,
                    97),
           act("Memcpy DtoD (Device -> Device)", 7, 98, 99, "copy")},
          100),
      OwnKernels{{"mse_partial_kernel"}, {}}, false, 1);
  EXPECT_FALSE(has(a, "no_custom_kernel", Severity::Reject));
  EXPECT_TRUE(a.flags.empty());
  EXPECT_TRUE(a.own_kernels_ran);
  EXPECT_EQ(a.candidate_kernels, 1);
  EXPECT_NEAR(a.record["candidate_time_share"].get<double>(), 90.0 / 94.0, 1e-9);
}

TEST(KernelTrace, TritonKernelsAreTheCandidatesOwn) {
  // Launched by Triton's launcher (JIT-compiled from the candidate's source): its own code,
  // although no extension was called and the dispatcher saw only PyTorch's allocations.
  auto by_launcher = assess_kernel_trace(
      trace({launched("mse_kernel", "triton", 1, 50),
             launched("void at::native::vectorized_elementwise_kernel<4, DivFunctor>", kTorch, 51,
                      53)},
            54),
      OwnKernels{}, false, 0);
  EXPECT_TRUE(by_launcher.flags.empty());
  EXPECT_EQ(by_launcher.candidate_kernels, 1);
  // Under torch.profiler (no launcher): named like one of its @triton.jit functions...
  auto by_name = assess_kernel_trace(trace({act("mse_kernel", 7, 1, 50)}, 51),
                                     OwnKernels{{}, {"mse_kernel"}}, false, 0);
  EXPECT_TRUE(by_name.flags.empty());
  // ... or a name that says nothing: never counted against the candidate.
  auto unknown = assess_kernel_trace(trace({act("triton_poi_fused_relu_0", 7, 1, 9)}, 10),
                                     OwnKernels{}, false, 0);
  EXPECT_TRUE(unknown.flags.empty());
  EXPECT_EQ(unknown.record["by_origin"]["other"], 1);
}

TEST(KernelTrace, TorchCompileKernelsLaunchedByPyTorchArePyTorchs) {
  // Inductor's generated Triton kernels run by PyTorch's static launcher: no kernel of the
  // candidate's own (the candidate wrote none).
  auto a =
      assess_kernel_trace(trace({launched("triton_red_fused_mean_pow_sub_0", kTorch, 1, 20)}, 21),
                          OwnKernels{}, false, 0);
  EXPECT_TRUE(has(a, "no_custom_kernel", Severity::Reject));
}

TEST(KernelTrace, NoKernelDecidesNothing) {
  // Copies only (the extension computed on the host): the dispatcher's evidence stands.
  auto a = assess_kernel_trace(trace({act("Memcpy DtoH (Device -> Pinned)", 7, 1, 5, "copy"),
                                      act("Memcpy HtoD (Pinned -> Device)", 7, 20, 25, "copy")},
                                     26),
                               OwnKernels{}, false, 1);
  EXPECT_FALSE(a.decides_custom_code);
  EXPECT_FALSE(has(a, "no_custom_kernel", Severity::Reject));
}

TEST(KernelTrace, AnIncompleteListDecidesOnlyForTheCandidate) {
  // 300 activities, 2 kept, no grouped list: the candidate's kernel may be among the others.
  json gpu = trace({launched("void at::native::elementwise_kernel<128, 2>", kTorch, 1, 2),
                    launched("void at::native::elementwise_kernel<128, 2>", kTorch, 3, 4)},
                   5);
  gpu["activity_count"] = 300;
  auto a = assess_kernel_trace(gpu, OwnKernels{}, false, 0);
  EXPECT_FALSE(a.decides_custom_code);
  EXPECT_FALSE(has(a, "no_custom_kernel", Severity::Reject));
  EXPECT_EQ(a.record["all_kernels_seen"], false);
  // The grouped list covers every kernel: the candidate's kernel after the 256th counts.
  gpu["kernels_seen"] = json::array({{{"name", "void at::native::elementwise_kernel<128, 2>"},
                                      {"launcher", "torch"},
                                      {"count", 299},
                                      {"us", 300.0}},
                                     {{"name", "void mse_partial_kernel<256>(float const*)"},
                                      {"launcher", kExt},
                                      {"count", 1},
                                      {"us", 900.0}}});
  auto grouped = assess_kernel_trace(gpu, OwnKernels{{"mse_partial_kernel"}, {}}, false, 1);
  EXPECT_TRUE(grouped.decides_custom_code);
  EXPECT_TRUE(grouped.flags.empty());
  EXPECT_EQ(grouped.kernels, 300);
  EXPECT_NEAR(grouped.record["candidate_time_share"].get<double>(), 0.75, 1e-9);
  // ... and where none of them is the candidate's, the whole list decides.
  gpu["kernels_seen"].erase(1);
  gpu["kernels_seen"][0]["count"] = 300;
  auto torch_only = assess_kernel_trace(gpu, OwnKernels{}, false, 0);
  EXPECT_TRUE(has(torch_only, "no_custom_kernel", Severity::Reject));
}

TEST(KernelTrace, UnavailableTraceDecidesNothing) {
  auto a =
      assess_kernel_trace({{"available", false}, {"why", "not a CUDA device"}}, {"k"}, true, 1);
  EXPECT_FALSE(a.available);
  EXPECT_TRUE(a.flags.empty());
}

}  // namespace
}  // namespace kbv::judge
