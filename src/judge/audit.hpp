// The problem audit (docs/protocol.md, "Problem audit"): is the reference output independent of its
// inputs (constant or near zero), and does the reference itself fail against float64?
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "judge/findings.hpp"

namespace kbv::judge {

struct AuditCase {
  std::string id;
  std::filesystem::path golden;  // holds tf32.out<i>, fp32.out<i>, truth.out<i>
  double input_rms = 0;
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
