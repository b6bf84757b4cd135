// The memory plan (eval/memory_plan.hpp): how many cases a problem keeps resident, how many
// timing sets, and when an evaluation must have the device alone, at the bundled suite's sizes
// and at KernelBench's (45_Average_Pooling_2D: 17.2 GB of inputs a case).
#include "eval/memory_plan.hpp"

#include <gtest/gtest.h>

namespace kbv::eval {
namespace {

constexpr double GB = 1e9;

MemoryFacts h200(double case_bytes, double output_bytes, int evaluations) {
  MemoryFacts f;
  f.device = true;
  f.total_bytes = 141 * GB;
  f.free_bytes = 139 * GB;
  f.case_bytes = case_bytes;
  f.judged_bytes = 2 * output_bytes;
  f.output_bytes = output_bytes;
  f.draw_peak_bytes = case_bytes;
  f.cases = 15;
  f.evaluations_per_device = evaluations;
  return f;
}

TEST(MemoryPlan, ASmallProblemKeepsEveryCaseAndEveryTimingSet) {
  auto plan = plan_memory(h200(0.05 * GB, 0.01 * GB, 4));
  EXPECT_EQ(plan.cached_cases, 15);
  EXPECT_EQ(plan.timing_sets, 4);
  EXPECT_FALSE(plan.alone);
  EXPECT_NE(plan.fits.find("all 15 cases resident"), std::string::npos) << plan.fits;
}

TEST(MemoryPlan, KernelBenchsLargestStreamsOneCaseAtATimeAndHasTheMemoryToItself) {
  // 45_Average_Pooling_2D: 17.2 GB in, 0.14 GB out (truth in float64: 0.28 GB); its draw peaks
  // at the template and the block (2x the inputs) and their float64 run.
  auto f = h200(17.2 * GB + 0.28 * GB, 0.14 * GB, 4);
  f.draw_peak_bytes = 4 * 17.2 * GB;
  auto plan = plan_memory(f);
  EXPECT_EQ(plan.cached_cases, 0);
  EXPECT_EQ(plan.timing_sets, 1);
  EXPECT_TRUE(plan.alone);
  EXPECT_GT(plan.working_bytes, 0.6 * 141 * GB);
  EXPECT_NE(plan.fits.find("one case at a time"), std::string::npos) << plan.fits;
  EXPECT_NE(plan.fits.find("the device's memory to itself"), std::string::npos) << plan.fits;
}

TEST(MemoryPlan, ALargeElementwiseProblemReservesItsPeakAndLeavesRoomBesideIt) {
  // 19_ReLU: 6.4 GB in and out, judged by 12.8 GB of float64 truth; its plan on the H200 said
  // 58 GB of working memory (session 10). What it reserves leaves the rest of the ledger to
  // smaller problems.
  auto f = h200(6.4 * GB + 12.8 * GB, 6.4 * GB, 4);
  f.draw_peak_bytes = 32.4 * GB;
  auto plan = plan_memory(f);
  EXPECT_FALSE(plan.alone);
  EXPECT_DOUBLE_EQ(plan.working_bytes, 32.4 * GB + 19.2 * GB + 6.4 * GB);
  EXPECT_LT(plan.working_bytes, 141 * GB * kReservableShare);
  EXPECT_NE(plan.fits.find("GiB of the device reserved"), std::string::npos) << plan.fits;
}

TEST(MemoryPlan, ADeferredSensitivityIsReservedApartFromWhatEveryEvaluationNeeds) {
  // 19_ReLU under protocol 3: its TF32 baseline is within the floor, so the sensitivity's two
  // float64 runs are deferred, estimated at the truth run's peak, two float64 output-sized
  // tensors and an output copy (64 GB). Counted in the draw's peak, they made the plan 90 GB,
  // over the ledger's 70: every large elementwise problem had the device alone, for runs only a
  // candidate over the floor (or a later draw whose baseline is) needs. Apart, the problem runs
  // beside others.
  auto f = h200(6.4 * GB + 12.8 * GB, 6.4 * GB, 4);
  f.draw_peak_bytes = 32.4 * GB;
  f.sensitivity_peak_bytes = 32.4 * GB + 2 * 12.8 * GB + 6.4 * GB;
  auto plan = plan_memory(f);
  EXPECT_FALSE(plan.alone);
  EXPECT_DOUBLE_EQ(plan.working_bytes, 32.4 * GB + 19.2 * GB + 6.4 * GB);
  EXPECT_DOUBLE_EQ(plan.sensitivity_bytes, 32.0 * GB);
  EXPECT_GT(plan.working_bytes + plan.sensitivity_bytes, 141 * GB * kReservableShare);
  EXPECT_NE(plan.fits.find("(+30 GiB for the sensitivity's runs, when needed)"), std::string::npos)
      << plan.fits;
  EXPECT_EQ(plan.to_json()["sensitivity_bytes"].get<double>(), 32.0 * GB);
  // Nothing deferred (or a peak the draw already passed): nothing apart.
  f.sensitivity_peak_bytes = 0;
  EXPECT_EQ(plan_memory(f).sensitivity_bytes, 0);
  f.sensitivity_peak_bytes = 10 * GB;
  EXPECT_EQ(plan_memory(f).sensitivity_bytes, 0);
}

TEST(MemoryPlan, ALargeProblemAloneOnItsDeviceKeepsWhatFitsItsShare) {
  // 38_L1Norm_: 8.6 GB in, 8.6 GB out (17.2 GB of float64 truth).
  auto plan = plan_memory(h200(8.6 * GB + 17.2 * GB, 8.6 * GB, 1));
  EXPECT_EQ(plan.cached_cases, 1);  // 30% of 141 GB holds one 25.8 GB case
  EXPECT_FALSE(plan.alone);         // nobody else on the device
  EXPECT_NE(plan.fits.find("1 of 15 cases resident"), std::string::npos) << plan.fits;
}

TEST(MemoryPlan, TheHostBudgetComesFromWhatIsFree) {
  MemoryFacts f;
  f.device = false;
  f.total_bytes = 24 * GB;
  f.free_bytes = 8 * GB;
  f.case_bytes = 2.1 * GB;
  f.judged_bytes = 0.001 * GB;
  f.cases = 15;
  auto plan = plan_memory(f);
  EXPECT_EQ(plan.cached_cases, 1);  // 30% of 8 GB
  EXPECT_FALSE(plan.alone);         // only a device is shared this way
  EXPECT_EQ(plan.timing_sets, 1);
}

TEST(MemoryPlan, ZeroSizedCasesDoNotDivideByZero) {
  MemoryFacts f;
  f.device = true;
  f.total_bytes = 1 * GB;
  f.cases = 3;
  auto plan = plan_memory(f);
  EXPECT_EQ(plan.cached_cases, 3);
  EXPECT_GE(plan.timing_sets, 1);
}

}  // namespace
}  // namespace kbv::eval

namespace kbv::eval {
namespace {

TEST(MemoryPlan, InputsAloneSayWhenAProblemMustHaveTheDeviceToItself) {
  // 19_ReLU's 6.4 GB of inputs need about 51 GB at their peak: more than a quarter of an H200.
  EXPECT_TRUE(needs_device_alone({6.4e9, 0}, 141e9, 4));
  EXPECT_DOUBLE_EQ(working_bytes_before_drawing({6.4e9, 0.1e9}), 8 * 6.4e9 + 10 * 0.1e9);
  EXPECT_FALSE(needs_device_alone({6.4e9, 0}, 141e9, 1));  // nobody else there
  EXPECT_FALSE(needs_device_alone({0.5e9, 0.1e9}, 141e9, 4));
  EXPECT_FALSE(needs_device_alone({6.4e9, 0}, 0, 4));  // no device figure: the host
}

// The forward's figures from the meta device, against the working bytes session 13's H200 audit
// measured after each problem's first draw (docs/results/cpu-2026-12-05-s17): sizes in bytes as
// the meta forward gives them for KernelBench 423217d.
TEST(MemoryPlan, TheMetaForwardMakesTheEstimateBeforeDrawingFollowTheMeasure) {
  // 19_ReLU (measured 58.0 GB): the forward's peak and outputs are its inputs' size.
  const ProblemSizes relu{6.44e9, 0, 6.44e9, 6.44e9};
  EXPECT_NEAR(working_bytes_before_drawing(relu), 58.0e9, 4e9);
  // 7_Matmul_with_small_K_dimension_: 17 MB of inputs, a 4.3 GB product (measured 64.5 GB under
  // protocol 2, whose draws also ran the two sensitivity runs): the inputs alone said 0.1 GB.
  const ProblemSizes small_k{16.8e6, 0, 4.29e9, 4.29e9};
  EXPECT_LT(working_bytes_before_drawing({16.8e6, 0}), 0.2e9);
  EXPECT_GT(working_bytes_before_drawing(small_k), 25e9);
  // 45_Average_Pooling_2D (measured 52.4 GB): 17.2 GB of inputs made it the device's alone
  // (137 GB) for a draw that needed far less; the pooled output is small.
  const ProblemSizes pooling{17.18e9, 0, 0.142e9, 0.142e9};
  EXPECT_TRUE(needs_device_alone({17.18e9, 0}, 150e9, 4));
  EXPECT_FALSE(needs_device_alone(pooling, 150e9, 2));
  EXPECT_NEAR(working_bytes_before_drawing(pooling), 52.4e9, 0.5e9);
  // Without the forward's figures (a forward the meta device cannot run), the inputs' rule.
  EXPECT_DOUBLE_EQ(working_bytes_before_drawing({6.44e9, 0, 6.44e9, 0}), 8 * 6.44e9);
}

}  // namespace
}  // namespace kbv::eval

namespace kbv::eval {
namespace {

TEST(MemoryPlan, WeightsWeighMoreThanInputsBeforeDrawing) {
  // 2_ShallowWideMLP: 8 MB in, 8.6 GB of weights; its reference process alone held 68.7 GB
  // when it ran out of memory beside five others (session 11). 10x its weights is more than
  // half an H200: it has the device's memory to itself from the start, not after a failure.
  EXPECT_TRUE(needs_device_alone({8.4e6, 8.6e9}, 141e9, 2));
  EXPECT_GT(working_bytes_before_drawing({8.4e6, 8.6e9}), 0.5 * 141e9);
}

TEST(MemoryPlan, TheCandidatesForwardAndModelAreReservedBesideTheDraw) {
  // 31_VisionAttention: 17 MB in and out, but a forward holds 8.6 GB of attention scores; the
  // candidate's process keeps that cached beside the reference's cases. Reserving only the
  // outputs beside the draw let six evaluations run the device out of memory (session 11).
  auto f = h200(0.034 * GB, 0.017 * GB, 6);
  f.draw_peak_bytes = 26 * GB;
  f.forward_peak_bytes = 8.6 * GB;
  f.model_bytes = 0.0003 * GB;
  auto plan = plan_memory(f);
  EXPECT_DOUBLE_EQ(plan.working_bytes, 26 * GB + 0.034 * GB + 8.6 * GB + 0.0003 * GB);
  // A forward that allocates nothing beyond its outputs reserves its outputs.
  f.forward_peak_bytes = 0.01 * GB;
  EXPECT_DOUBLE_EQ(plan_memory(f).working_bytes, 26 * GB + 0.034 * GB + 0.017 * GB + 0.0003 * GB);
}

}  // namespace
}  // namespace kbv::eval

namespace kbv::eval {
namespace {

TEST(MemoryPlan, SessionsStartedAheadTakeTheirShareOfTheCasesOnlyWhereThereAreAny) {
  // A 2 GB case on the H200 with four evaluations: 30% of 141 GB / 4 keeps 5 cases; where kbv
  // run starts sessions ahead, 22% keeps 3 (the other 8% is the ahead ledger's).
  auto alone = h200(2 * GB, 0.1 * GB, 4);
  EXPECT_EQ(plan_memory(alone).cached_cases, 5);
  auto beside_ahead = alone;
  beside_ahead.sessions_ahead = true;
  EXPECT_EQ(plan_memory(beside_ahead).cached_cases, 3);
  // The host has no ahead ledger: the same share either way.
  auto host = alone;
  host.device = false;
  auto host_ahead = host;
  host_ahead.sessions_ahead = true;
  EXPECT_EQ(plan_memory(host).cached_cases, plan_memory(host_ahead).cached_cases);
}

}  // namespace
}  // namespace kbv::eval

namespace kbv::eval {
namespace {

// On session 24's H100 (85 GB as torch counts it, so the ledger holds 42.5 GB): which of
// KernelBench's problems have the device's memory to themselves from their sizes at load.
TEST(MemoryPlan, WhatAProblemNeedsBeforeItsFirstDrawSaysWhetherItHasTheWholeLedger) {
  constexpr double kH100 = 85e9;
  const ProblemSizes relu{6.44e9, 0, 6.44e9, 6.44e9};  // 19_ReLU: 58 GB, alone there
  EXPECT_TRUE(needs_whole_ledger(relu, kH100));
  EXPECT_FALSE(needs_whole_ledger(relu, 150e9));            // the H200's ledger holds 75 GB
  const ProblemSizes gemm{0.02e9, 0.02e9, 0.02e9, 0.04e9};  // a level-2 GEMM: shares the device
  EXPECT_FALSE(needs_whole_ledger(gemm, kH100));
  // At the capacity exactly: the reservation is the whole ledger (reserve_device_memory).
  const double at = kReservableShare * kH100;
  EXPECT_TRUE(needs_whole_ledger({at / kWorkingFactor, 0}, kH100));
  EXPECT_FALSE(needs_whole_ledger({0.99 * at / kWorkingFactor, 0}, kH100));
  EXPECT_FALSE(needs_whole_ledger(relu, 0));  // no device figure: the host
}

}  // namespace
}  // namespace kbv::eval
