// The judges of what the candidate's worker reports around a call, the static scan's findings,
// the flag collection and the stage failures: each with the honest answer it must not flag.
#include "judge/call_findings.hpp"

#include <gtest/gtest.h>

#include "judge/findings.hpp"
#include "judge/stage_failure.hpp"

namespace kbv::judge {
namespace {
using nlohmann::json;

const Flag* find(const Findings& f, const std::string& id) {
  for (const auto& flag : f.flags()) {
    if (flag.id == id) return &flag;
  }
  return nullptr;
}

TEST(CallJudge, AnHonestAnswerRaisesNothing) {
  CallJudge judge;
  Findings out;
  judge.forward({{"numerics_changed", json::object()},
                 {"harness_tampered", json::array()},
                 {"l2_persisting", json::object()},
                 {"watch",
                  {{"outputs_changed_after_return", json::array()},
                   {"threads_left_running", json::array()}}}},
                "h1_native#0", out);
  judge.call_state(json::object(), "timing", out);
  EXPECT_TRUE(out.flags().empty());
}

TEST(CallJudge, APlanChosenUnderMemoryPressureIsSaidNeverJudged) {
  Findings out;
  CallJudge::plans({{"plans_under_pressure", json::object()}}, out);
  EXPECT_TRUE(out.flags().empty());  // the worker's honest answer, where nothing ran out
  CallJudge judge;
  judge.call_state({{"plans_under_pressure",
                     {{"forward",
                       {{"where", "a checked call"},
                        {"events", 1},
                        {"bytes", 3.0 * (1 << 30)},
                        {"free_bytes", 1.5 * (1 << 30)}}}}}},
                   "running the forward on native#0", out);
  const Flag* flag = find(out, "plans_under_pressure");
  ASSERT_NE(flag, nullptr);
  EXPECT_EQ(flag->severity, Severity::Info);
  EXPECT_NE(flag->detail.find("3.00 GiB"), std::string::npos) << flag->detail;
  EXPECT_NE(flag->detail.find("1.50 GiB free"), std::string::npos) << flag->detail;
  EXPECT_FALSE(out.has_reject());
}

TEST(CallJudge, PrecisionLoweredOnceIsAWarningTwiceAReject) {
  CallJudge judge;
  Findings out;
  json lowered = {{"numerics_changed", {{"float32_matmul_precision", {"high", "medium"}}}}};
  judge.numerics(lowered, out);
  EXPECT_NE(find(out, "numerics_flags_changed"), nullptr);
  EXPECT_EQ(find(out, "precision_flags_changed"), nullptr);
  judge.numerics(lowered, out);  // lowered again after it was put back
  ASSERT_NE(find(out, "precision_flags_changed"), nullptr);
  EXPECT_EQ(find(out, "precision_flags_changed")->severity, Severity::Reject);
}

TEST(CallJudge, RaisingPrecisionIsOnlyAWarning) {
  CallJudge judge;
  Findings out;
  json raised = {{"numerics_changed", {{"float32_matmul_precision", {"high", "highest"}}}}};
  judge.numerics(raised, out);
  judge.numerics(raised, out);
  EXPECT_NE(find(out, "numerics_flags_changed"), nullptr);
  EXPECT_FALSE(out.has_reject());
}

TEST(CallJudge, HarnessTamperingIsAReject) {
  Findings out;
  CallJudge::harness({{"harness_tampered", {"time.perf_counter"}}}, "timing", out);
  ASSERT_NE(find(out, "harness_tampered"), nullptr);
  EXPECT_NE(find(out, "harness_tampered")->detail.find("time.perf_counter"), std::string::npos);
}

TEST(CallJudge, ThreadLeftRunningIsAWarningUntilTheOutputChanges) {
  CallJudge judge;
  Findings out;
  json quiet = {
      {"watch",
       {{"outputs_changed_after_return", json::array()}, {"threads_left_running", {"worker-1"}}}}};
  judge.forward(quiet, "h1#0", out);
  ASSERT_NE(find(out, "background_thread"), nullptr);
  EXPECT_EQ(find(out, "background_thread")->severity, Severity::Warn);
  json late = {
      {"watch", {{"outputs_changed_after_return", {0}}, {"threads_left_running", {"worker-1"}}}}};
  judge.forward(late, "h2#0", out);
  EXPECT_EQ(find(out, "background_thread")->severity, Severity::Reject);  // raised, not added
  EXPECT_NE(find(out, "output_changed_after_return"), nullptr);
  int count = 0;
  for (const auto& f : out.flags()) count += f.id == "background_thread";
  EXPECT_EQ(count, 1);
}

TEST(CallJudge, PersistingL2IsAWarning) {
  Findings out;
  CallJudge::l2({{"l2_persisting", {{"limit_bytes", 1 << 20}}}}, "timing", out);
  ASSERT_NE(find(out, "l2_persisting_changed"), nullptr);
  EXPECT_EQ(find(out, "l2_persisting_changed")->severity, Severity::Warn);
}

TEST(StaticScan, FindingsBecomeEvidenceFlags) {
  Findings out;
  json scan = {{"findings", json::object()}};
  scan["findings"]["scan_streams"] = {
      {"severity", "warn"}, {"meaning", "creates streams"}, {"evidence", {"a", "b"}}};
  scan["findings"]["scan_low_precision"] = {{"severity", "info"}, {"evidence", json::array()}};
  judge_static_scan(scan, out);
  ASSERT_EQ(out.flags().size(), 2u);
  EXPECT_EQ(find(out, "scan_streams")->detail, "static scan: creates streams (a; b)");
  EXPECT_FALSE(out.has_reject());
  Findings none;
  judge_static_scan({{"findings", json::object()}}, none);
  EXPECT_TRUE(none.flags().empty());
}

TEST(Findings, FirstEvidenceIsKeptAndUnknownIdsRefused) {
  Findings out;
  out.add("inputs_mutated", Severity::Reject, "first");
  out.add("inputs_mutated", Severity::Reject, "second");
  ASSERT_EQ(out.flags().size(), 1u);
  EXPECT_EQ(out.flags()[0].detail, "first");
  EXPECT_THROW(out.add("not_a_flag", Severity::Warn, ""), std::logic_error);
  Result r;
  out.into(r);
  EXPECT_TRUE(r.has_reject_flag());
}

TEST(StageFailure, LoadAndCallFailuresMapToVerdicts) {
  orchestrate::Response compile;
  compile.status = orchestrate::Response::Status::Error;
  compile.error_kind = "compile_error";
  compile.message = "nvcc failed\nline 2";
  auto c = load_failure(compile, std::chrono::seconds(900));
  EXPECT_EQ(c.failure.verdict, Verdict::CompileError);
  EXPECT_EQ(c.failure.reason, "nvcc failed");
  EXPECT_EQ(c.detail, "nvcc failed\nline 2");

  orchestrate::Response slow;
  slow.status = orchestrate::Response::Status::Timeout;
  EXPECT_EQ(load_failure(slow, std::chrono::seconds(5)).failure.verdict, Verdict::Timeout);
  slow.message = "did not answer within 120 s";
  auto t = call_failure(slow, "timing");
  EXPECT_EQ(t.failure.verdict, Verdict::Timeout);
  EXPECT_NE(t.failure.reason.find("during timing"), std::string::npos);

  orchestrate::Response died;
  died.status = orchestrate::Response::Status::Died;
  died.message = "killed by SIGSEGV";
  EXPECT_EQ(call_failure(died, "the forward").failure.verdict, Verdict::RuntimeError);
  EXPECT_EQ(call_failure(died, "the forward").failure.reason,
            "killed by SIGSEGV during the forward");
}

TEST(StageFailure, AnIllegalAddressOrASegfaultReadsAsUnmappedMemoryAndNothingElseDoes) {
  orchestrate::Response device;
  device.status = orchestrate::Response::Status::Error;
  device.message = "AcceleratorError: CUDA error: an illegal memory access was encountered";
  EXPECT_TRUE(reads_unmapped_memory(device));
  device.message = "forward raised RuntimeError: kbv_native: cudaMemcpyAsync failed";
  device.detail = "... cudaErrorIllegalAddress: an illegal memory access was encountered";
  EXPECT_TRUE(reads_unmapped_memory(device));

  orchestrate::Response host;
  host.status = orchestrate::Response::Status::Died;
  host.message = "the worker was killed by signal 11 (SIGSEGV, Segmentation fault)";
  EXPECT_TRUE(reads_unmapped_memory(host));

  // Ordinary failures are not: a wrong shape, running out of memory, a kill, a timeout.
  orchestrate::Response plain;
  plain.status = orchestrate::Response::Status::Error;
  plain.message = "RuntimeError: shape mismatch";
  EXPECT_FALSE(reads_unmapped_memory(plain));
  plain.message = "torch.OutOfMemoryError: CUDA out of memory";
  EXPECT_FALSE(reads_unmapped_memory(plain));
  orchestrate::Response killed;
  killed.status = orchestrate::Response::Status::Died;
  killed.message = "the worker was killed by signal 9 (SIGKILL, Killed)";
  EXPECT_FALSE(reads_unmapped_memory(killed));
  orchestrate::Response slow;
  slow.status = orchestrate::Response::Status::Timeout;
  slow.message = "did not answer within 120 s (SIGSEGV in its log)";
  EXPECT_FALSE(reads_unmapped_memory(slow));
}

}  // namespace
}  // namespace kbv::judge
