#include "judge/verdict.hpp"

#include <fmt/format.h>

#include "core/figure_format.hpp"

namespace kbv::judge {
namespace {

std::string rejection_reason(const Result& result) {
  std::string ids, first_detail;
  for (const auto& flag : result.flags) {
    if (flag.severity != Severity::Reject) continue;
    ids += (ids.empty() ? "" : ", ") + flag.id;
    if (first_detail.empty()) first_detail = flag.detail;
  }
  return fmt::format("rejected as a reward hack ({}): {}", ids, first_detail);
}

const FamilyResult* first_failed_family(const Result& result) {
  for (const auto& family : result.correctness) {
    if (family.evaluated && family.passed < family.draws) return &family;
  }
  return nullptr;
}

std::string incorrect_reason(const FamilyResult& family) {
  for (const auto& c : family.cases) {
    if (!c.value("passed", false)) {
      return fmt::format("wrong on the {} family, draw {}: {}", family.family, c.value("draw", 0),
                         c.value("reason", std::string("outputs differ")));
    }
  }
  return fmt::format("wrong on the {} family", family.family);
}

std::string correct_reason(const Result& result) {
  int families = 0, draws = 0;
  for (const auto& family : result.correctness) {
    families += 1;
    draws += family.draws;
  }
  std::string reason =
      fmt::format("matches the reference on all {} draws of {} input families", draws, families);
  const auto& vs = result.speedup.value("vs_tf32", nlohmann::json());
  if (vs.is_object() && vs.contains("value")) {
    reason += fmt::format("; {} the TF32 baseline", times(vs["value"].get<double>()));
    if (vs.value("tie", false)) reason += " (a tie within noise)";
  }
  return reason;
}

}  // namespace

void decide_verdict(Result& result, const std::optional<StageFailure>& failure) {
  if (failure && failure->verdict == Verdict::CompileError) {
    result.verdict = Verdict::CompileError;
    result.reason = failure->reason;
  } else if (result.has_reject_flag()) {
    result.verdict = Verdict::Rejected;
    result.reason = rejection_reason(result);
  } else if (failure) {
    result.verdict = failure->verdict;
    result.reason = failure->reason;
  } else if (const auto* family = first_failed_family(result)) {
    result.verdict = Verdict::Incorrect;
    result.reason = incorrect_reason(*family);
  } else if (result.correctness.empty()) {
    result.verdict = Verdict::RuntimeError;
    result.reason = "no input family was evaluated";
  } else {
    result.verdict = Verdict::Correct;
    result.reason = correct_reason(result);
  }
}

}  // namespace kbv::judge
