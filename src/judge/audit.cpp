#include "judge/audit.hpp"

#include <fmt/format.h>

#include <cmath>

#include "check/compare.hpp"
#include "tensor/safetensors.hpp"

namespace kbv::judge {
namespace {

double rms(const tensor::TensorView& t) {
  long double sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.value_at(i);
    if (std::isfinite(v)) {
      sum += static_cast<long double>(v) * v;
      ++finite;
    }
  }
  return finite ? static_cast<double>(std::sqrt(sum / finite)) : 0.0;
}

// Max |a - b| over elements, NaN-aware: differing finiteness counts as infinitely different.
double max_difference(const tensor::TensorView& a, const tensor::TensorView& b) {
  if (a.shape != b.shape || a.dtype != b.dtype) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.value_at(i), y = b.value_at(i);
    if (std::isfinite(x) != std::isfinite(y)) return INFINITY;
    if (std::isfinite(x)) worst = std::max(worst, std::fabs(x - y));
  }
  return worst;
}

}  // namespace

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
  auto first = tensor::SafetensorsFile::open(cases.front().golden);
  const auto* first_out = first.find("tf32.out0");
  for (const auto& c : cases) {
    auto golden = tensor::SafetensorsFile::open(c.golden);
    const auto* out = golden.find("tf32.out0");
    const auto* truth = golden.find("truth.out0");
    if (!out || !truth || !first_out) continue;
    double out_rms = rms(*out);
    largest_output_rms = std::max(largest_output_rms, out_rms);
    if (!(out_rms <= kNearZero * c.input_rms)) all_near_zero = false;
    if (all_constant && &c != &cases.front()) {
      double diff = max_difference(*out, *first_out);
      if (!(diff <= kConstant * std::max(rms(*first_out), 1e-30))) all_constant = false;
    }
    if (out->dtype == tensor::DType::F32 || out->dtype == tensor::DType::F64) {
      auto outcome = check::compare(*out, *out, *truth, check::Policy::verified());
      double err = outcome.baseline ? outcome.baseline->normwise_rel : 0.0;
      bool nonfinite = outcome.baseline && outcome.baseline->nonfinite_mismatches > 0;
      audit.figures["reference_vs_truth_normwise"][c.id] = err;
      if (err > kUnstable || nonfinite) audit.unstable.push_back(c.id);
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
