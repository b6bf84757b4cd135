#include "judge/verdict.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {

FamilyResult family(std::string name, int draws, int passed, std::string reason = "") {
  FamilyResult f;
  f.family = std::move(name);
  f.draws = draws;
  f.passed = passed;
  f.evaluated = true;
  for (int d = 0; d < draws; ++d) {
    f.cases.push_back({{"draw", d}, {"passed", d < passed}, {"reason", reason}});
  }
  return f;
}

TEST(Verdict, AllFamiliesPassingIsCorrect) {
  Result r;
  r.correctness = {family("native", 1, 1), family("h2_mixed_sign", 3, 3)};
  r.speedup["vs_tf32"] = {{"value", 1.5}, {"tie", false}};
  decide_verdict(r, std::nullopt);
  EXPECT_EQ(r.verdict, Verdict::Correct);
  EXPECT_NE(r.reason.find("4 draws of 2 input families"), std::string::npos);
  EXPECT_NE(r.reason.find("1.50x"), std::string::npos);
}

TEST(Verdict, ASlowSpeedupKeepsItsDigits) {
  // 1,700x slower than the baseline is not "0.00x" (issue 19).
  Result r;
  r.correctness = {family("native", 1, 1)};
  r.speedup["vs_tf32"] = {{"value", 1.0 / 1700}, {"tie", false}};
  decide_verdict(r, std::nullopt);
  EXPECT_NE(r.reason.find("; 0.000588x the TF32 baseline"), std::string::npos) << r.reason;
  r.speedup["vs_tf32"] = {{"value", 19.24}, {"tie", false}};
  decide_verdict(r, std::nullopt);
  EXPECT_NE(r.reason.find("; 19.2x the TF32 baseline"), std::string::npos) << r.reason;
}

TEST(Verdict, OneFailedDrawIsIncorrectAndNamesFamilyAndDraw) {
  Result r;
  r.correctness = {family("native", 1, 1), family("h3_wide_range", 3, 1, "NaN at [0, 3]")};
  decide_verdict(r, std::nullopt);
  EXPECT_EQ(r.verdict, Verdict::Incorrect);
  EXPECT_NE(r.reason.find("h3_wide_range"), std::string::npos);
  EXPECT_NE(r.reason.find("draw 1"), std::string::npos);
  EXPECT_NE(r.reason.find("NaN at [0, 3]"), std::string::npos);
}

TEST(Verdict, RejectFlagOutranksWrongAnswersAndCrashes) {
  Result r;
  r.correctness = {family("native", 1, 0, "off")};
  r.add_flag("inputs_mutated", Severity::Reject, "input 0 changed");
  decide_verdict(r, StageFailure{Verdict::RuntimeError, "boom"});
  EXPECT_EQ(r.verdict, Verdict::Rejected);
  EXPECT_NE(r.reason.find("inputs_mutated"), std::string::npos);
}

TEST(Verdict, WarningsNeverReject) {
  Result r;
  r.correctness = {family("native", 1, 1)};
  r.add_flag("numerics_flags_changed", Severity::Warn, "tf32 off");
  decide_verdict(r, std::nullopt);
  EXPECT_EQ(r.verdict, Verdict::Correct);
}

TEST(Verdict, CompileErrorComesFirst) {
  Result r;
  r.add_flag("inputs_mutated", Severity::Reject, "x");
  decide_verdict(r, StageFailure{Verdict::CompileError, "missing ;"});
  EXPECT_EQ(r.verdict, Verdict::CompileError);
  EXPECT_EQ(r.reason, "missing ;");
}

TEST(Verdict, StageFailureOutranksIncorrect) {
  Result r;
  r.correctness = {family("native", 1, 0, "off")};
  decide_verdict(r, StageFailure{Verdict::Timeout, "hung"});
  EXPECT_EQ(r.verdict, Verdict::Timeout);
}

TEST(Verdict, NothingEvaluatedIsNotCorrect) {
  Result r;
  decide_verdict(r, std::nullopt);
  EXPECT_EQ(r.verdict, Verdict::RuntimeError);
}

TEST(ResultJson, HasTheSchemaKeysAndOneFlagPerId) {
  Result r;
  r.add_flag("numerics_flags_changed", Severity::Warn, "first");
  r.add_flag("numerics_flags_changed", Severity::Warn, "second");
  r.correctness = {family("native", 1, 1)};
  decide_verdict(r, std::nullopt);
  auto j = r.to_json();
  for (const char* key : {"schema", "verdict", "reason", "flags", "correctness", "timing",
                          "speedup", "memory", "problem", "environment", "limits"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["flags"].size(), 1u);
  EXPECT_EQ(j["flags"][0]["detail"], "first");
  EXPECT_EQ(j["correctness"]["native"]["ok"], true);
  EXPECT_EQ(j["verdict"], "correct");
}

}  // namespace
}  // namespace kbv::judge
