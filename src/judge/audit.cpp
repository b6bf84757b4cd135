#include "judge/audit.hpp"

#include <fmt/format.h>

#include <cmath>

namespace kbv::judge {
namespace {

double number(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const auto text = value.get<std::string>();
    if (text == "inf") return INFINITY;
    if (text == "-inf") return -INFINITY;
    return NAN;
  }
  return 0;
}

}  // namespace

AuditCase AuditCase::from_figures(const nlohmann::json& c) {
  AuditCase a;
  a.id = c.value("id", "");
  a.input_rms = number(c.value("input_rms", nlohmann::json(0.0)));
  const auto audit = c.value("audit", nlohmann::json::object());
  a.output_rms = number(audit.value("output_rms", nlohmann::json(0.0)));
  a.first = audit.value("first", false);
  a.sample_diff_from_first = number(audit.value("sample_diff_from_first", nlohmann::json(0.0)));
  const std::string dtype = audit.value("dtype", "torch.float32");
  a.float_output = dtype == "torch.float32" || dtype == "torch.float64";
  const auto baselines = c.value("baselines", nlohmann::json::object());
  const auto tf32 = baselines.value("tf32", nlohmann::json::array());
  if (!tf32.empty() && tf32[0].contains("vs_truth") && tf32[0]["vs_truth"].is_object()) {
    const auto figures = tf32[0]["vs_truth"].value("figures", nlohmann::json::object());
    a.reference_vs_truth_normwise = number(figures.value("normwise_rel", nlohmann::json(0.0)));
    a.reference_nonfinite_mismatch = figures.value("nonfinite_mismatches", 0) > 0;
  }
  return a;
}

nlohmann::json ProblemAudit::to_json() const {
  return {{"degenerate", degenerate},
          {"degenerate_why", degenerate_why},
          {"reference_fails_float64", unstable},
          {"figures", figures}};
}

ProblemAudit audit_problem(const std::vector<AuditCase>& cases) {
  ProblemAudit audit;
  if (cases.empty()) return audit;
  bool all_near_zero = true;
  bool all_constant = cases.size() >= 2;
  double largest_output_rms = 0;
  double first_rms = 0;
  for (const auto& c : cases) {
    if (c.first) first_rms = c.output_rms;
  }
  for (const auto& c : cases) {
    largest_output_rms = std::max(largest_output_rms, c.output_rms);
    if (!(c.output_rms <= kNearZero * c.input_rms)) all_near_zero = false;
    if (all_constant && !c.first) {
      if (!(c.sample_diff_from_first <= kConstant * std::max(first_rms, 1e-30))) {
        all_constant = false;
      }
    }
    if (c.float_output) {
      audit.figures["reference_vs_truth_normwise"][c.id] = c.reference_vs_truth_normwise;
      if (c.reference_vs_truth_normwise > kUnstable || c.reference_nonfinite_mismatch) {
        audit.unstable.push_back(c.id);
      }
    }
  }
  audit.figures["largest_output_rms"] = largest_output_rms;
  if (all_near_zero) {
    audit.degenerate = true;
    audit.degenerate_why = "the reference output is near zero for every input drawn";
  } else if (all_constant) {
    audit.degenerate = true;
    audit.degenerate_why = "the reference output is the same for every input drawn";
  }
  return audit;
}

void judge_audit(const ProblemAudit& audit, Findings& out) {
  if (audit.degenerate) out.add("problem_degenerate", Severity::Warn, audit.degenerate_why);
  if (!audit.unstable.empty()) {
    out.add("reference_fails_float64", Severity::Warn,
            fmt::format("the TF32 reference differs from its float64 run by more than {} on {}",
                        kUnstable, nlohmann::json(audit.unstable).dump()));
  }
}

}  // namespace kbv::judge
