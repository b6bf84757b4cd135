#include "judge/operator_trace.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {
using nlohmann::json;

bool has(const TraceAssessment& a, const std::string& id) {
  for (const auto& f : a.flags) {
    if (f.id == id && f.severity == Severity::Reject) return true;
  }
  return false;
}

TEST(Trace, HeavyClasses) {
  EXPECT_EQ(heavy_class("aten::mm"), "matmul");
  EXPECT_EQ(heavy_class("aten::addmm"), "matmul");
  EXPECT_EQ(heavy_class("aten::convolution"), "conv");
  EXPECT_EQ(heavy_class("aten::_softmax"), "softmax");
  EXPECT_EQ(heavy_class("aten::relu"), "");
}

TEST(Trace, LibraryMatmulWithoutKernelIsRejected) {
  json ref = {{"ops", {{"aten::mm", 1}}}};
  json cand = {{"ops", {{"aten::mm", 1}, {"aten::contiguous", 2}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(has(a, "library_main_op"));
  EXPECT_FALSE(has(a, "kernel_never_called"));
}

TEST(Trace, ExtensionAroundAtMatmulOnAPureMatmulProblemIsRejected) {
  json ref = {{"ops", {{"aten::mm", 1}}}};
  json cand = {{"ops", {{"aten::mm", 1}}},
               {"extension_calls", {{"ext.fast_matmul", 1}}},
               {"extension_functions", {"ext.fast_matmul"}}};
  EXPECT_TRUE(has(assess_trace(ref, cand), "library_main_op"));
}

TEST(Trace, LibraryConvWithCustomEpilogueIsAccepted) {
  json ref = {{"ops", {{"aten::convolution", 1}, {"aten::add", 1}, {"aten::tanh", 1}}}};
  json cand = {{"ops", {{"aten::convolution", 1}, {"aten::empty_like", 1}}},
               {"extension_calls", {{"ext.add_tanh", 1}}},
               {"extension_functions", {"ext.add_tanh"}}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(a.flags.empty());
}

TEST(Trace, CustomKernelForTheHeavyOpIsAccepted) {
  json ref = {{"ops", {{"aten::mm", 1}}}};
  json cand = {{"ops", {{"aten::zeros", 1}}},
               {"extension_calls", {{"ext.matmul", 1}}},
               {"extension_functions", {"ext.matmul"}}};
  EXPECT_TRUE(assess_trace(ref, cand).flags.empty());
}

TEST(Trace, ElementwiseProblemInPyTorchIsNotLibraryMainOpButNoCustomKernel) {
  json ref = {{"ops", {{"aten::relu", 1}}}};
  json cand = {{"ops", {{"aten::clamp", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()}};
  auto a = assess_trace(ref, cand);
  EXPECT_FALSE(has(a, "library_main_op"));  // no heavy operator to leave to PyTorch
  EXPECT_TRUE(has(a, "no_custom_kernel"));  // but none of the candidate's code ran
}

// Issue 19: `F.mse_loss(p, t)` for a reference `torch.mean((p - t) ** 2)` passed every family
// at 1.89x: another library operator than the reference's escapes library_main_op.
TEST(Trace, AnotherLibraryOperatorThanTheReferencesIsNoCustomKernel) {
  json ref = {{"ops", {{"aten::sub", 1}, {"aten::pow", 1}, {"aten::mean", 1}}}};
  json cand = {{"ops", {{"aten::mse_loss", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()},
               {"jit_launches", 0}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(has(a, "no_custom_kernel"));
  EXPECT_FALSE(has(a, "library_main_op"));
  EXPECT_EQ(a.own_calls, 0);
  EXPECT_EQ(a.record["own_calls"], 0);
  for (const auto& f : a.flags) {
    if (f.id == "no_custom_kernel") {
      EXPECT_NE(f.detail.find("aten::mse_loss x1"), std::string::npos) << f.detail;
    }
  }
}

TEST(Trace, OwnExtensionWithTorchGlueIsNotNoCustomKernel) {
  // The candidate's op does the reduction; PyTorch only allocates, reshapes and divides.
  json ref = {{"ops", {{"aten::sub", 1}, {"aten::pow", 1}, {"aten::mean", 1}}}};
  json cand = {{"ops", {{"aten::view", 2}, {"aten::empty", 1}, {"aten::div", 1}}},
               {"extension_calls", {{"ext.squared_error_sum", 1}}},
               {"extension_functions", {"ext.squared_error_sum"}}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(a.flags.empty());
  EXPECT_EQ(a.own_calls, 1);
}

TEST(Trace, CustomNamespaceOperatorIsTheCandidatesOwnCode) {
  json ref = {{"ops", {{"aten::sub", 1}, {"aten::pow", 1}, {"aten::mean", 1}}}};
  json cand = {{"ops", {{"kbv_mse::squared_error_mean", 1}, {"aten::empty", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()}};
  EXPECT_TRUE(assess_trace(ref, cand).flags.empty());
}

TEST(Trace, TritonLaunchesAreTheCandidatesOwnCode) {
  // Triton kernels never pass through the dispatcher: the worker counts their launches.
  json ref = {{"ops", {{"aten::convolution", 1}, {"aten::add", 1}, {"aten::tanh", 1}}}};
  json cand = {{"ops", {{"aten::convolution", 1}, {"aten::empty_like", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()},
               {"jit_launches", 1}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(a.flags.empty());  // conv by PyTorch, epilogue by its own Triton kernel
  EXPECT_EQ(a.record["jit_launches"], 1);
}

TEST(Trace, LibraryFlagsRejectOnlyUnderVerifiedWithoutAllowLibrary) {
  const Flag none{"no_custom_kernel", Severity::Reject, "x"};
  const Flag main_op{"library_main_op", Severity::Reject, "x"};
  const Flag ghost{"kernel_never_called", Severity::Reject, "x"};
  const Flag other{"inputs_mutated", Severity::Reject, "x"};
  const LibraryPolicy verified{true, false, false};
  const LibraryPolicy allow{true, true, false};
  const LibraryPolicy standard{false, false, false};
  const LibraryPolicy audit{true, false, true};
  for (const auto& flag : {none, main_op, ghost}) {
    EXPECT_EQ(trace_flag_severity(flag, verified), Severity::Reject) << flag.id;
    EXPECT_EQ(trace_flag_severity(flag, allow), Severity::Warn) << flag.id;
    EXPECT_EQ(trace_flag_severity(flag, standard), Severity::Warn) << flag.id;
    EXPECT_EQ(trace_flag_severity(flag, audit), Severity::Warn) << flag.id;
  }
  EXPECT_EQ(trace_flag_severity(other, allow), Severity::Reject);
  EXPECT_EQ(trace_flag_severity(other, standard), Severity::Reject);
  EXPECT_TRUE(verified.rejects());
  EXPECT_FALSE(allow.rejects());
}

TEST(Trace, BuiltButNeverCalledIsRejected) {
  json ref = {{"ops", {{"aten::relu", 1}}}};
  json cand = {{"ops", {{"aten::relu", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", {"ext.relu_kernel"}}};
  EXPECT_TRUE(has(assess_trace(ref, cand), "kernel_never_called"));
}

TEST(Trace, CustomNamespaceOperatorCountsAsAKernelCall) {
  json ref = {{"ops", {{"aten::mm", 1}, {"aten::add", 1}}}};
  json cand = {{"ops", {{"mylib::gemm", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", {"ext.gemm"}}};
  EXPECT_TRUE(assess_trace(ref, cand).flags.empty());
}

TEST(Trace, TraceErrorDecidesNothing) {
  json ref = {{"ops", {{"aten::mm", 1}}}};
  json cand = {{"error", "RuntimeError: no"}};
  auto a = assess_trace(ref, cand);
  EXPECT_TRUE(a.flags.empty());
  EXPECT_EQ(a.record["error"], "RuntimeError: no");
}

}  // namespace
}  // namespace kbv::judge
