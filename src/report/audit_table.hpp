// The suite-quality table of `kbv audit` (issue 18, point 6): every problem's reference evaluated
// as its own candidate through the verified pipeline, one row per problem. What METR and the
// published KernelBench-Verified did by hand when they excluded degenerate problems, for any
// suite: does it fit (and how), how long its evaluation takes, is it degenerate, does the
// reference disagree with its float64 run, how much TF32 buys, how noisy its timing is (the
// reference against itself: the interval should straddle 1), its peak memory.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/render.hpp"

namespace kbv::report {

struct AuditRow {
  std::string problem;  // level/name
  std::optional<int> level;
  std::string verdict;  // of the reference against itself: anything but correct is a finding
  std::string reason;
  std::string fits;  // the memory plan's words
  bool alone = false;
  double seconds = 0;  // the evaluation's wall time
  bool degenerate = false;
  std::string degenerate_why;
  int reference_fails_float64 = 0;  // cases where the TF32 reference fails its float64 run
  std::optional<double> worst_reference_normwise;
  // Cases where the TF32 reference is over its own elementwise budget (protocol version 3 admits
  // its excess), and its worst error over budget there: the budget does not cover the problem.
  int reference_over_budget = 0;
  std::optional<double> worst_reference_budget_ratio;
  // Cases whose every output was within the floor of its budget, so the sensitivity's float64
  // runs were never made (docs/protocol.md, deferred sensitivity): the audit's own speed lever.
  int floor_judged = 0;
  int truth_float32 = 0;  // cases whose truth fell back to float32 (recorded reasons)
  // The float64 truth run a chunk of rows at a time (the most chunks of any case; 1: whole),
  // or why a working set that large went whole (python/kbv/row_chunks.py).
  int truth_chunks = 1;
  std::string truth_rows_note;
  std::optional<double> tf32_ms, fp32_ms, fp32_over_tf32;
  std::optional<double> self_speedup, self_low, self_high;  // vs TF32: the noise floor
  std::optional<double> peak_bytes;
  std::vector<std::string> flags;  // warn and reject flags, "severity:id"
  // Kernels one call launched (the median over the kernel audit's calls) for the reference's
  // copy timed as the candidate and for the TF32 baseline. The same code on the same inputs:
  // different counts mean a library chose another plan in one of the two processes (PyTorch
  // keeps the first cuDNN plan that ran for a shape for the process's life, and a workspace it
  // could not allocate then rules the tensor-core plans out), so the self speedup measures
  // that choice, not noise: 57_conv_transposed_2D's TF32 baseline ran 3,676 kernels a call at
  // FP32 speed against its copy's 4, a 4.45x "speedup" (docs/results/h100-2026-12-07-s35).
  std::optional<double> copy_kernels, tf32_kernels;
  // Which kernels the first audited call launched, by name (kernel_audit.signature's hash; ""
  // where none was recorded) and the most frequent one's name: the same count of other kernels
  // is another plan too.
  std::string copy_signature, tf32_signature, copy_top_kernel, tf32_top_kernel;
  // The copy's worker saw a library plan chosen while device memory ran out (the flag
  // plans_under_pressure): the explanation of a slow copy. The baseline's never is: the
  // reference refuses to time one (python/kbv/plan_pressure.py).
  bool copy_plans_squeezed = false;
  bool kernel_counts_differ() const {
    return copy_kernels && tf32_kernels && *copy_kernels != *tf32_kernels;
  }
  bool plans_differ() const {
    if (kernel_counts_differ()) return true;
    return !copy_signature.empty() && !tf32_signature.empty() && copy_signature != tf32_signature;
  }
};

AuditRow audit_row(const nlohmann::json& result);
std::vector<AuditRow> audit_rows(const std::vector<nlohmann::json>& results);

// md (a table and a summary line), csv, or json; html is md's table.
std::string render_audit(const std::vector<AuditRow>& rows, Format format);

}  // namespace kbv::report
