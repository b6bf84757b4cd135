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

TEST(Trace, ElementwiseProblemInPyTorchIsNotLibraryMainOp) {
  json ref = {{"ops", {{"aten::relu", 1}}}};
  json cand = {{"ops", {{"aten::clamp", 1}}},
               {"extension_calls", json::object()},
               {"extension_functions", json::array()}};
  EXPECT_TRUE(assess_trace(ref, cand).flags.empty());
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
