#pragma once

// The correctness decision: a candidate output against the reference output and the float64
// truth, under a named tolerance policy. docs/protocol.md ("Correctness") gives the budgets,
// why fixed allclose tolerances are not enough, and the TF32 figures behind the defaults.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tensor/safetensors.hpp"

namespace kbv::check {

// Error of one output against the tensor it is judged by, over the positions where both are
// finite (non-finite positions are counted separately).
struct ErrorFigures {
  double max_abs = 0;
  double max_rel = 0;  // over elements whose truth is non-zero
  double normwise_rel = 0;
  double worst_elem_ratio = 0;  // max over elements of |c - t| / (|t| + scale)
  int64_t numel = 0;
  int64_t elements_over = 0;  // elements outside their elementwise budget
  int64_t nonfinite_mismatches = 0;
  double scale = 0;  // RMS of the finite truth values (of the reference under AllClose)
  nlohmann::json to_json() const;
};

enum class PolicyKind { Scaled, AllClose };

struct Policy {
  PolicyKind kind = PolicyKind::Scaled;
  // AllClose (KernelBench `standard`: 1e-4/1e-4 vs the FP32 reference; `kbv-paper`: 1e-3/1e-3 vs
  // the TF32 reference): |c - r| <= atol + rtol * |r| for every element; any NaN fails
  // (torch.allclose with equal_nan=False).
  double atol = 0, rtol = 0;
  // Scaled (kbv `verified`, truth is a float64 run of the reference): the candidate's error vs
  // truth must be within
  //   normwise:    ||c - t|| / ||t|| <= norm_budget,
  //                norm_budget = max(norm_floor, baseline_multiplier * the TF32 baseline's)
  //   elementwise: |c_i - t_i| <= elem_budget * (|t_i| + scale) for every i, scale = RMS of
  //                truth (an absolute floor sized to the output, so an all-zero output never
  //                passes a small-valued problem),
  //                elem_budget = max(elem_floor, baseline_multiplier * the baseline's
  //                worst_elem_ratio)
  //   non-finite:  positions and kinds (NaN, +Inf, -Inf) of the truth cast to the output dtype
  //                must match the candidate's exactly.
  // Integer and bool outputs must be exact, up to the ties the reference itself resolves
  // differently from the truth.
  double norm_floor = 1e-3, elem_floor = 1e-2, baseline_multiplier = 4.0;

  static Policy verified();
  static Policy allclose(double atol, double rtol);
  nlohmann::json to_json() const;
};

struct Outcome {
  bool passed = false;
  // One human sentence: why it failed, or a note on a pass that needed the tie allowance.
  std::string reason;
  ErrorFigures candidate;
  std::optional<ErrorFigures> baseline;  // the reference against the truth (Scaled only)
  double norm_budget = 0, elem_budget = 0;
  nlohmann::json to_json() const;
};

// `reference` is the baseline output in the problem's precision: its dtype and shape are the
// contract the candidate must match exactly. `truth` is the float64 run (same shape) or the
// reference itself when no float64 run exists; AllClose judges against `reference` and ignores
// `truth`. Throws std::invalid_argument when truth and reference disagree in shape (a harness
// bug, not the candidate's fault).
Outcome compare(const tensor::TensorView& candidate, const tensor::TensorView& reference,
                const tensor::TensorView& truth, const Policy& policy);

}  // namespace kbv::check
