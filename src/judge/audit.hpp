// The problem audit (docs/protocol.md, "Problem audit"): is the reference output independent of its
// inputs (constant or near zero), and does the reference itself fail against float64?
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "judge/findings.hpp"

namespace kbv::judge {

// What the audit needs of one case, as the reference measured it where the outputs live (a
// case's figures: docs/case-path.md). The "constant" check compares a strided sample of the
// first output (up to 2^20 elements) with the first case's, not every element: the outputs of
// KernelBench's problems reach 8.6 GB and are never all resident at once.
struct AuditCase {
  std::string id;
  double input_rms = 0;
  double output_rms = 0;                   // of the TF32 baseline's first output, finite values
  bool first = false;                      // the case the others are compared with
  double sample_diff_from_first = 0;       // max |difference| over the sample (inf: mismatch)
  bool float_output = true;                // float32 or float64 first output
  double reference_vs_truth_normwise = 0;  // the TF32 baseline against the float64 truth
  bool reference_nonfinite_mismatch = false;

  // From a case's figures (its `audit` and `baselines.tf32[0]`).
  static AuditCase from_figures(const nlohmann::json& c);
};

struct ProblemAudit {
  bool degenerate = false;
  std::string degenerate_why;         // empty when not degenerate
  std::vector<std::string> unstable;  // cases where the reference fails its float64 truth
  nlohmann::json figures = nlohmann::json::object();
  nlohmann::json to_json() const;
};

// Near zero: every case's output RMS is below kNearZero times its input RMS. Constant: every
// case's output equals the first case's within kConstant relative to the output's RMS (needs
// at least two cases). Unstable: the TF32 reference's normwise error against the float64 truth
// exceeds kUnstable, or their non-finite values differ.
inline constexpr double kNearZero = 1e-6;
inline constexpr double kConstant = 1e-6;
inline constexpr double kUnstable = 1e-2;

ProblemAudit audit_problem(const std::vector<AuditCase>& cases);

// The audit's findings about the problem (warnings: they never decide a verdict).
void judge_audit(const ProblemAudit& audit, Findings& out);

}  // namespace kbv::judge
